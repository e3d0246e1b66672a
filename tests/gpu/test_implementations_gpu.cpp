// Every GPU implementation under the full trace (its trace build, for fused kernels): it
// passes its bounds on 200 seeded cases of mixed shapes, masks, features, dtypes and
// distributions (those it declines aside), and each feature it claims traces clean.
#include <algorithm>
#include <map>

#include "catch.h"
#include "harness/random_cases.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"

namespace fc {
namespace {

CaseResult judge_on_gpu(Implementation& impl, const CaseSpec& spec, const JudgeOptions& options = {}) {
  const AttentionInputs in = generate_inputs(spec);
  const DeviceInputs device(in, nullptr);
  return judge_case(impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), &device, options);
}

std::string outcome(const CaseResult& r) {
  return std::string(verdict_name(r.verdict)) + " " + r.reason +
         (r.divergence ? r.divergence->output + " " + r.divergence->cause + ": " + r.divergence->evidence : std::string());
}

// min_claimed: how many of the 200 random cases the implementation must take (the rest use
// head dims, layouts or masks it declines).
void require_passes_200_cases(const std::string& name, int min_claimed = 100) {
  std::unique_ptr<Implementation> impl = make_implementation(name);
  REQUIRE(impl);
  int passed = 0, ran = 0, claimed = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const CaseSpec spec = random_case(seed, false).spec;
    claimed += impl->unsupported(make_problem(spec)) ? 0 : 1;
    const CaseResult r = judge_on_gpu(*impl, spec);
    INFO(name << " " << spec.label() << ": " << outcome(r));
    CHECK((r.verdict == Verdict::pass || r.verdict == Verdict::skipped));
    passed += r.verdict == Verdict::pass ? 1 : 0;
    ran += r.verdict == Verdict::skipped ? 0 : 1;
  }
  CHECK(ran == claimed);  // every case it does not decline runs
  CHECK(claimed >= min_claimed);  // and enough of the random cases are its kind
  CHECK(passed == ran);
}

struct Feature {
  std::string what;
  CaseSpec spec;
};

Feature feature(const std::string& what, Shape shape, const std::string& mask, DType dtype = DType::f16) {
  CaseSpec c;
  c.shape = shape;
  c.mask = mask;
  c.dtype = dtype;
  c.seed = 3;
  return {what, c};
}

// One case per feature, at sizes past one tile of every kernel.
const std::vector<Feature>& features() {
  static const std::vector<Feature> all = {
      feature("GQA", {2, 8, 200, 300, 64, 2}, "causal-br"),
      feature("MQA", {1, 4, 130, 130, 128, 1}, "none", DType::bf16),
      feature("head dim 32", {2, 2, 150, 200, 32}, "causal"),
      feature("head dim 96", {1, 2, 150, 270, 96}, "padding", DType::bf16),
      feature("head dim 256", {1, 2, 140, 190, 256}, "causal-br"),
      feature("sliding window", {1, 2, 300, 400, 64}, "window=100,0"),
      feature("two-sided window", {1, 2, 260, 260, 128}, "window=70,30", DType::bf16),
      feature("softcap", {2, 2, 140, 200, 64}, "causal+softcap=20"),
      feature("ALiBi", {1, 4, 150, 230, 64}, "causal-br+alibi"),
      feature("finite masking bias", {2, 2, 140, 200, 64}, "causal+padding=0,200+masked-bias=-65504"),
      feature("varlen", {3, 4, 200, 300, 64, 2}, "varlen=130:170,0:40,200:300+causal-br"),
      feature("paged KV", {2, 2, 150, 333, 128}, "paged=16+window=64,0"),
      feature("varlen and paged KV", {3, 2, 200, 300, 64}, "varlen=17:290,200:0,64:64+paged=32+causal-br"),
  };
  return all;
}

}  // namespace

TEST_CASE("naive passes the trace on 200 seeded cases", "[gpu][naive]") { require_passes_200_cases("naive"); }
TEST_CASE("cublaslt-paged passes the trace on 200 seeded cases", "[gpu][cublaslt]") {
  require_passes_200_cases("cublaslt-paged");
}
TEST_CASE("cublaslt-splitk passes the trace on 200 seeded cases", "[gpu][cublaslt]") {
  require_passes_200_cases("cublaslt-splitk");
}
TEST_CASE("fa1-scalar passes the trace on 200 seeded cases", "[gpu][fa1]") { require_passes_200_cases("fa1-scalar"); }
TEST_CASE("wmma-fused passes the trace on 200 seeded cases", "[gpu][wmma]") { require_passes_200_cases("wmma-fused"); }
// D 64 and 128, no ALiBi, paged blocks of 8 keys or more: about a third of the random cases.
TEST_CASE("wgmma-fused passes the trace on 200 seeded cases", "[gpu][wgmma]") {
  require_passes_200_cases("wgmma-fused", 40);
}
TEST_CASE("flash-splitkv passes the trace on 200 seeded cases", "[gpu][splitkv]") {
  require_passes_200_cases("flash-splitkv");
}

TEST_CASE("every feature traces clean on every GPU implementation that claims it", "[gpu][features]") {
  // What each implementation must claim (README, Implementations): the rest it may decline.
  const std::map<std::string, std::vector<std::string>> declines = {
      {"naive", {}},
      {"cublaslt-paged", {}},
      {"cublaslt-splitk", {}},
      {"fa1-scalar", {}},
      {"wmma-fused", {"ALiBi"}},
      {"flash-splitkv", {"ALiBi"}},
      {"wgmma-fused",
       {"head dim 32", "head dim 96", "head dim 256", "ALiBi"}},
  };
  for (const auto& impl : make_implementations()) {
    if (!impl->on_gpu()) continue;
    int judged = 0;
    for (const Feature& f : features()) {
      const std::optional<std::string> why = impl->unsupported(make_problem(f.spec));
      const auto allowed = declines.find(impl->name());
      const bool may_decline = allowed == declines.end() ||
                               std::find(allowed->second.begin(), allowed->second.end(), f.what) != allowed->second.end();
      INFO(impl->name() << ", " << f.what << " (" << f.spec.label() << "): " << (why ? *why : std::string("claimed")));
      if (why) {
        CHECK(may_decline);
        continue;
      }
      const CaseResult r = judge_on_gpu(*impl, f.spec);
      INFO(outcome(r));
      CHECK(r.verdict == Verdict::pass);
      ++judged;
    }
    // One of the project's own that runs here (wgmma-fused declines off sm_90a) was judged.
    INFO(impl->name());
    if (declines.count(impl->name()) && !impl->unsupported(make_problem(features().front().spec))) CHECK(judged > 0);
  }
}

}  // namespace fc

namespace fc {

TEST_CASE("a trace build whose buffers exceed the device's free memory is an error naming their size", "[gpu][wmma]") {
  std::unique_ptr<Implementation> impl = make_implementation("wmma-fused");
  REQUIRE(impl);
  CaseSpec spec;
  spec.shape = {1, 8, 65536, 65536, 64};  // every tile of every row: about 390 GiB
  spec.seed = 1;
  REQUIRE_FALSE(impl->unsupported(make_problem(spec)));
  JudgeOptions whole;
  whole.window_rows = 65536;  // one window of every row: the whole trace (else it runs in windows)
  const CaseResult r = judge_on_gpu(*impl, spec, whole);
  INFO(outcome(r));
  CHECK(r.verdict == Verdict::error);
  CHECK(r.reason.find("trace build's buffers need") != std::string::npos);
  CHECK(r.reason.find("GiB free") != std::string::npos);
}

}  // namespace fc

namespace fc {

// A fused kernel's trace build run window by window (--window-rows) is judged as the whole
// trace: the same verdicts, failures and first divergence, the flags over every element.
TEST_CASE("a fused kernel judged in windows of rows gets the whole trace's results", "[gpu][wmma][wgmma]") {
  for (const char* name : {"wmma-fused", "wgmma-fused"}) {
    CaseSpec spec;
    spec.shape = {2, 3, 700, 650, 64};
    spec.mask = "causal";
    spec.seed = 4;
    std::unique_ptr<Implementation> probe = make_implementation(name);
    REQUIRE(probe);
    if (std::string(name) == "wmma-fused") REQUIRE_FALSE(probe->unsupported(make_problem(spec)));
    if (probe->unsupported(make_problem(spec))) continue;  // wgmma-fused off sm_90
    for (const std::string fault : {"", "production-epilogue-scale"}) {
      for (const char* rows : {"all", "16"}) {
        INFO(name << " fault '" << fault << "' rows " << rows);
        std::unique_ptr<Implementation> impl = make_implementation(name);
        if (!fault.empty()) impl->inject(fault);
        JudgeOptions whole, windows;
        whole.rows = windows.rows = parse_rows(rows);
        windows.window_rows = 384;  // rows 0-383, 384-699: whole blocks of 128 (wmma-fused) or 192 rows
        const CaseResult a = judge_on_gpu(*impl, spec, whole), w = judge_on_gpu(*impl, spec, windows);
        INFO(outcome(a) << " / " << outcome(w));
        CHECK(w.coverage.find("traced in windows of 384") != std::string::npos);
        CHECK(a.verdict == (fault.empty() ? Verdict::pass : Verdict::diverged));
        CHECK(w.verdict == a.verdict);
        CHECK(same_divergence(a.divergence, w.divergence, true));
        REQUIRE(w.outputs.size() == a.outputs.size());
        for (std::size_t i = 0; i < a.outputs.size(); ++i) {
          const OutputResult &x = a.outputs[i], &y = w.outputs[i];
          INFO(x.name);
          CHECK(x.compared == y.compared);
          CHECK(x.end_to_end.elements == y.end_to_end.elements);
          CHECK(x.end_to_end.failures() == y.end_to_end.failures());
          CHECK(x.local.failures() == y.local.failures());
          CHECK(y.end_to_end.max_normalized_error == Approx(x.end_to_end.max_normalized_error).epsilon(1e-6));
          CHECK(x.flags.unwritten == y.flags.unwritten);
          CHECK(x.flags.nan + x.flags.pos_inf + x.flags.neg_inf == y.flags.nan + y.flags.pos_inf + y.flags.neg_inf);
          if (x.end_to_end.first_failure) {
            REQUIRE(y.end_to_end.first_failure);
            CHECK(x.end_to_end.first_failure->index == y.end_to_end.first_failure->index);
          }
        }
      }
    }
  }
}

}  // namespace fc

namespace fc {

// Long context at odd lengths (issue 15): every GPU implementation passes, or declines, at
// 65537 and 131071 keys (a last tile or page of one key, offsets past 2^16 and 2^17 keys) and
// at 65537 query rows (a row sample with the rows where a row index passes 2^16); the fused
// kernels, which claim these lengths, never decline them where they run at all.
TEST_CASE("every GPU implementation passes at 65537 and 131071 keys and 65537 query rows", "[gpu][long]") {
  struct Long {
    Shape shape;
    const char* mask;
    const char* rows;
  };
  const Long cases[] = {{{1, 2, 40, 65537, 64}, "causal-br", "all"},
                        {{1, 1, 24, 131071, 128}, "none", "all"},
                        {{1, 2, 65537, 160, 64}, "none", "64"}};
  CaseSpec small;
  small.shape = {1, 1, 128, 128, 64};
  for (const auto& impl : make_implementations()) {
    if (!impl->on_gpu()) continue;
    const bool runs_here = !impl->unsupported(make_problem(small));  // wgmma-fused off sm_90a
    for (const Long& l : cases) {
      CaseSpec spec;
      spec.shape = l.shape;
      spec.mask = l.mask;
      spec.seed = 5;
      const std::optional<std::string> why = impl->unsupported(make_problem(spec));
      INFO(impl->name() << " " << spec.label() << ": " << (why ? *why : std::string("claimed")));
      const std::string name = impl->name();
      if (runs_here && (name == "wmma-fused" || name == "wgmma-fused" || name == "flash-splitkv")) CHECK_FALSE(why);
      if (why) continue;
      JudgeOptions options;
      options.rows = parse_rows(l.rows);
      const CaseResult r = judge_on_gpu(*impl, spec, options);
      INFO(outcome(r));
      CHECK(r.verdict == Verdict::pass);
    }
  }
}

}  // namespace fc

// Triage of bug reports: what the inputs say before any kernel, and minimization to the
// smallest case that still fails the same way.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "catch.h"
#include "core/rng.h"
#include "harness/inputs.h"
#include "harness/io/npz.h"
#include "harness/triage/input_findings.h"
#include "harness/triage/minimize.h"
#include "kernels/implementation.h"
#include "reference/attention.h"

namespace fc {
namespace {
bool has(const std::vector<InputFinding>& f, const std::string& id) {
  for (const InputFinding& x : f) {
    if (x.cause == id) return true;
  }
  return false;
}

AttentionInputs with_nan_key() {
  CaseSpec spec;
  spec.shape = {2, 2, 40, 40, 64};
  spec.seed = 9;
  AttentionInputs in = generate_inputs(spec);
  in.k.set(((1 * 2 + 1) * 40 + 23) * 64 + 5, NAN);  // b=1 h=1 key 23, dim 5
  return in;
}
}  // namespace

TEST_CASE("input findings name NaN, Inf, masked rows, fp16 overflow, exp overflow and subnormals with the first place",
          "[triage]") {
  CaseSpec uniform;
  uniform.dist = "uniform";
  for (const InputFinding& f : find_input_problems(generate_inputs(uniform), DType::f16)) CHECK_FALSE(f.defect);
  const std::vector<InputFinding> nan = find_input_problems(with_nan_key(), DType::f16);
  const auto found = std::find_if(nan.begin(), nan.end(), [](const InputFinding& f) { return f.cause == "input-nan"; });
  REQUIRE(found != nan.end());
  CHECK(found->detail == "k holds 1 NaN, the first at b=1 h=1 row 23 col 5");
  CHECK(found->tensor == "k");
  CHECK(found->index == Index4{1, 1, 23, 5});
  CHECK(found->defect);

  CaseSpec large;
  large.shape = {1, 2, 64, 256, 64};
  large.dist = "large";
  large.mask = "padding=0";
  large.shape.batch = 1;
  const std::vector<InputFinding> masked = find_input_problems(generate_inputs(large), DType::f16);
  CHECK(has(masked, "fully-masked-rows"));
  large.mask = "none";
  const std::vector<InputFinding> big = find_input_problems(generate_inputs(large), DType::f16);
  CHECK(has(big, "score-overflow-unscaled"));
  CHECK(has(big, "exp-overflow-risk"));
  CHECK_FALSE(has(big, "fully-masked-rows"));
  CHECK_FALSE(has(big, "score-overflow"));  // 1/sqrt(D) brings them back into range
  large.scale = 1.0;
  CHECK(has(find_input_problems(generate_inputs(large), DType::f16), "score-overflow"));
  // fp16's range is no risk to kernels that read bf16: nothing narrower to form q.k in.
  const std::vector<InputFinding> bf16_big = find_input_problems(generate_inputs(large), DType::bf16);
  CHECK_FALSE(has(bf16_big, "score-overflow"));
  CHECK_FALSE(has(bf16_big, "score-overflow-unscaled"));
  // A masking bias beyond fp16 (float32's min, Hugging Face's) is a masked key there, not an
  // overflowing score.
  CaseSpec biased;
  biased.shape = {1, 1, 16, 32, 64};
  biased.mask = "causal+masked-bias=-3.4e38";
  const std::vector<InputFinding> masked_by_bias = find_input_problems(generate_inputs(biased), DType::f16);
  CHECK_FALSE(has(masked_by_bias, "score-overflow"));

  AttentionInputs inf = with_nan_key();
  inf.k.set(((1 * 2 + 1) * 40 + 23) * 64 + 5, 0.5);
  inf.v.set(((0 * 2 + 1) * 40 + 2) * 64 + 9, -INFINITY);
  const std::vector<InputFinding> infinite = find_input_problems(inf, DType::f16);
  const auto first_inf = std::find_if(infinite.begin(), infinite.end(), [](const InputFinding& f) { return f.cause == "input-inf"; });
  REQUIRE(first_inf != infinite.end());
  CHECK(first_inf->index == Index4{0, 1, 2, 9});
  CHECK(first_inf->defect);
  CHECK_FALSE(has(infinite, "input-nan"));

  CaseSpec tiny;
  tiny.dist = "tiny";
  const std::vector<InputFinding> small = find_input_problems(generate_inputs(tiny), DType::f16);
  CHECK(has(small, "subnormal-inputs"));
  CHECK_FALSE(has(find_input_problems(generate_inputs(uniform), DType::f16), "subnormal-inputs"));
}

TEST_CASE("fp32 inputs past the kernels' format are found for that format, not for fp16 always", "[triage]") {
  AttentionInputs in = with_nan_key();
  in.k.set(((1 * 2 + 1) * 40 + 23) * 64 + 5, 0.5);
  in.q = in.q.to(DType::f32);
  in.k = in.k.to(DType::f32);
  in.v = in.v.to(DType::f32);
  in.problem.dtype = DType::f32;
  in.v.set(7, 70000.0);  // past fp16's 65504, well inside bf16
  const std::vector<InputFinding> fp16 = find_input_problems(in, DType::f16);
  const auto found = std::find_if(fp16.begin(), fp16.end(), [](const InputFinding& f) { return f.cause == "conversion-overflow"; });
  REQUIRE(found != fp16.end());
  CHECK(found->detail == "v holds 1 fp32 value past the fp16 range, the first at b=0 h=0 row 0 col 7: they become Inf in fp16");
  CHECK(found->tensor == "v");
  CHECK(found->index == Index4{0, 0, 0, 7});
  CHECK_FALSE(has(find_input_problems(in, DType::bf16), "conversion-overflow"));
  in.v.set(7, 65519.0);  // rounds to 65504: not lost
  CHECK_FALSE(has(find_input_problems(in, DType::f16), "conversion-overflow"));
}

TEST_CASE("a failing case is minimized to the row and key that cause it", "[triage]") {
  const AttentionInputs in = with_nan_key();
  std::unique_ptr<Implementation> impl = make_implementation("cpu-emulated");
  const CaseResult r = judge_case(*impl, in, describe_case(in, "nan", "none", "normal", 9), nullptr);
  REQUIRE(r.divergence);
  CHECK(r.divergence->cause == "input-nan");
  const std::optional<Minimized> m = minimize(*impl, in, *r.divergence);
  REQUIRE(m);
  CHECK(m->inputs.problem.shape == Shape{1, 1, 1, 1, 8});
  REQUIRE(m->judged.result.divergence);
  CHECK(m->judged.result.divergence->cause == "input-nan");
  CHECK(std::isnan(m->inputs.k.get(5)));
}

TEST_CASE("slicing a case keeps every mask part's meaning", "[triage]") {
  CaseSpec spec;
  spec.shape = {2, 2, 30, 50, 64};
  spec.mask = "causal-br+padding+bool";
  spec.seed = 4;
  const AttentionInputs in = generate_inputs(spec);
  const AttentionInputs part = slice_case(in, 1, 0, 5, 20, 10, 45, 32);
  for (std::int64_t i = 0; i < 15; ++i)
    for (std::int64_t j = 0; j < 35; ++j) {
      CHECK(mask_bias(part.problem, 0, 0, i, j) ==
            mask_bias(in.problem, 1, 0, i + 5, j + 10));
    }
  CHECK(part.problem.scale == in.problem.scale);
}

TEST_CASE("triage on the command line: findings, verdicts, a minimized fixture, exit codes", "[triage]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fc_triage_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const AttentionInputs in = with_nan_key();
  write_npz((dir / "report.npz").string(), {{"q", in.q}, {"k", in.k}, {"v", in.v}});
  const std::string cli = FC_CLI_PATH;
  const std::string out = (dir / "out.txt").string();
  const int status = std::system((cli + " triage " + (dir / "report.npz").string() + " --minimize " +
                                  (dir / "minimal.h5").string() + " --json " + (dir / "triage.json").string() + " > " + out)
                                     .c_str());
  CHECK(WEXITSTATUS(status) == 1);
  std::ifstream text(out);
  const std::string all((std::istreambuf_iterator<char>(text)), std::istreambuf_iterator<char>());
  CHECK(all.find("input-nan: k holds 1 NaN") != std::string::npos);
  CHECK(all.find("B2 H2 S40 D64 -> B1 H1 S1 D8") != std::string::npos);
  std::ifstream json_file(dir / "triage.json");
  const std::string json = std::regex_replace(
      std::string((std::istreambuf_iterator<char>(json_file)), std::istreambuf_iterator<char>()), std::regex("\n *"), "");
  CHECK(json.find(R"({"cause": "input-nan","tensor": "k","index": {"b": 1,"h": 1,"row": 23,"col": 5},"detail": "k holds 1 NaN)") !=
        std::string::npos);
  CHECK(fs::exists(dir / "minimal.h5"));
  const int replay = std::system((cli + " replay " + (dir / "minimal.h5").string() + " > /dev/null").c_str());
  CHECK(WEXITSTATUS(replay) == 1);  // the minimal case still diverges
  fs::remove_all(dir);
}

TEST_CASE("triage --minimize shrinks a B4 H8 S1024 report with a fully masked row to one head and at most 64 rows",
          "[triage]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fc_triage_minimize_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // PyTorch SDPA form: q, k, v [4,8,1024,16] fp16, a bool attn_mask [4,1,1024,1024] (True =
  // attend) under which row 700 of batch 2 attends to nothing.
  Rng rng(3, 1);
  std::map<std::string, HostTensor> report;
  for (const char* name : {"q", "k", "v"}) {
    HostTensor t(DType::f16, {4, 8, 1024, 16});
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, rng.normal());
    report[name] = std::move(t);
  }
  HostTensor keep(DType::boolean, {4, 1, 1024, 1024});
  for (std::int64_t i = 0; i < keep.numel(); ++i) keep.set(i, 1.0);
  for (std::int64_t j = 0; j < 1024; ++j) keep.set((2 * 1024 + 700) * 1024 + j, 0.0);
  report["attn_mask"] = std::move(keep);
  write_npz((dir / "report.npz").string(), report);

  const std::string cli = FC_CLI_PATH, out = (dir / "out.txt").string(), minimal = (dir / "minimal.h5").string();
  const int status = std::system((cli + " triage " + (dir / "report.npz").string() +
                                  " --impl cpu-emulated --inject masked-row-nan --minimize " + minimal + " > " + out)
                                     .c_str());
  CHECK(WEXITSTATUS(status) == 1);
  std::ifstream text(out);
  const std::string all((std::istreambuf_iterator<char>(text)), std::istreambuf_iterator<char>());
  INFO(all);
  CHECK(all.find("fully-masked-rows: 8 query rows have no key to attend to (all 1024 masked), the first row 700 of b=2 h=0") !=
        std::string::npos);
  std::smatch sizes;
  REQUIRE(std::regex_search(all, sizes, std::regex("B4 H8 S1024 D16 -> B1 H1 S(\\d+)(?: (\\d+))? D(\\d+) in \\d+ runs; "
                                                   "still softmax fully-masked-row")));
  CHECK(std::stoi(sizes[1]) <= 64);  // query rows (Sq, or Sq and Sk when they differ)
  CHECK(std::stoi(sizes[3]) <= 16);
  const int replay = std::system((cli + " replay " + minimal + " > " + out).c_str());
  CHECK(WEXITSTATUS(replay) == 1);  // the fixture still diverges...
  std::ifstream replayed(out);
  const std::string again((std::istreambuf_iterator<char>(replayed)), std::istreambuf_iterator<char>());
  CHECK(again.find("(fully-masked-row); the replay agrees") != std::string::npos);  // ...the same way
  fs::remove_all(dir);
}


TEST_CASE("triage --arithmetic judges the report's outputs under the kernel's declared formats", "[triage]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fc_triage_arith_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  CaseSpec spec;
  spec.shape = {1, 2, 32, 48, 64};
  spec.seed = 5;
  const AttentionInputs in = generate_inputs(spec);
  // The scores an fp16 kernel formed, saved upcast to fp32: fp16 precision in an fp32 array.
  const ReferenceTensors r = compute_reference(in, {});
  const HostTensor scores = r.scores.to(DType::f16).to(DType::f32);
  const std::string report = (dir / "report.npz").string();
  write_npz(report, {{"q", in.q}, {"k", in.k}, {"v", in.v}, {"scores", scores}, {"out", r.output.to(DType::f16)}});
  const auto triage = [&](const std::string& options) {
    const std::string json = (dir / "triage.json").string();
    const int status =
        std::system((std::string(FC_CLI_PATH) + " triage " + report + " --impl cpu-emulated " + options + " --json " + json +
                     " > /dev/null")
                        .c_str());
    std::ifstream in(json);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::make_pair(WEXITSTATUS(status), text);
  };
  // Judged as the fp32 it is stored in, its fp16 rounding is over the bound: precision-loss.
  const auto [undeclared, undeclared_json] = triage("");
  CHECK(undeclared == 1);
  CHECK(undeclared_json.find("\"cause\": \"precision-loss\"") != std::string::npos);
  // Declared, the same scores pass.
  const auto [declared, declared_json] = triage("--arithmetic scores=fp16");
  CHECK(declared == 0);
  CHECK(declared_json.find("\"diverged\": 0") != std::string::npos);

  // fp32 inputs that the kernel read as fp16: declared, its outputs are judged on the rounded
  // inputs, as the implementations are run on them.
  spec.dtype = DType::f32;
  const AttentionInputs wide = generate_inputs(spec);
  const ReferenceTensors from_fp16 = compute_reference(for_kernels(wide, DType::f16), {});
  write_npz(report, {{"q", wide.q}, {"k", wide.k}, {"v", wide.v},
                     {"scores", from_fp16.scores.to(DType::f16).to(DType::f32)}, {"out", from_fp16.output.to(DType::f16)}});
  const auto [read_fp16, read_fp16_json] = triage("--arithmetic input=fp16,scores=fp16");
  CHECK(read_fp16 == 0);
  CHECK(read_fp16_json.find("\"diverged\": 0") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace fc

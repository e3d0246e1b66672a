// What ships is judged: every judged case also runs the production build (untraced, in fresh
// poisoned buffers) and compares its results with the FP64 reference and, bit for bit, with
// the trace build's. A defect that lives only in the production build is trace-build-mismatch.
#include <filesystem>

#include "catch.h"
#include "harness/inputs.h"
#include "harness/io/snapshot.h"
#include "harness/trace/judge.h"
#include "kernels/implementation.h"

namespace fc {
namespace {

CaseSpec production_case() {
  CaseSpec s;
  s.shape = {1, 2, 40, 150, 64};
  s.mask = "causal-br";
  s.seed = 5;
  return s;
}

// The production build's output (its other results, an lse, come after it or not at all).
const OutputResult* production_row(const CaseResult& r) {
  for (const OutputResult& o : r.outputs) {
    if (o.production && o.quantity == Quantity::output) return &o;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a clean run judges its production build too, equal bit for bit to the trace build", "[trace][production]") {
  for (const char* name : {"cpu-emulated", "cpu-emulated-paged"}) {
    std::unique_ptr<Implementation> impl = make_implementation(name);
    const CaseSpec spec = production_case();
    const AttentionInputs in = generate_inputs(spec);
    const CaseResult r = judge_case(*impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), nullptr);
    INFO(name);
    CHECK(r.verdict == Verdict::pass);
    const OutputResult* p = production_row(r);
    REQUIRE(p);
    CHECK(p->name.size() > std::string(" (production)").size());
    CHECK(p->name.compare(p->name.size() - 13, 13, " (production)") == 0);
    CHECK(p->compared);
    CHECK(p->compared_with_trace);
    CHECK(p->local.elements == 1 * 2 * 40 * 64);
    CHECK(p->local.max_abs_error == 0);
    CHECK(p->end_to_end.passed());

    const CaseResult without = judge_case(*impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed),
                                          nullptr, JudgeOptions{BoundChoice::tight, false, {}});
    CHECK(production_row(without) == nullptr);
  }
}

TEST_CASE("a defect of the production build alone is trace-build-mismatch at its first element, and replays",
          "[trace][production]") {
  std::unique_ptr<Implementation> impl = make_implementation("cpu-emulated-paged");
  impl->inject("production-epilogue-scale");
  const CaseSpec spec = production_case();
  const AttentionInputs in = generate_inputs(spec);
  const CaseDescription d = describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed);
  const Judged j = judge_case_keeping(*impl, in, d, nullptr, true);
  REQUIRE(j.result.divergence);
  const Divergence& div = *j.result.divergence;
  CHECK(div.output == "normalize (production)");
  CHECK(div.cause == "trace-build-mismatch");
  CHECK(div.index == Index4{0, 0, 0, 0});
  CHECK(div.evidence.find("differs from its trace build") != std::string::npos);
  // Named against the trace build's value, exactly: the table prints both.
  CHECK(div.stage_local);
  REQUIRE(div.kernel);
  REQUIRE(div.reference);
  REQUIRE(div.bound);
  CHECK(*div.bound == 0);
  CHECK(*div.reference != *div.kernel);
  for (const OutputResult& o : j.result.outputs) {
    if (!o.production) CHECK(o.passed());  // every stage of the trace build passed
  }

  const std::filesystem::path file = std::filesystem::temp_directory_path() / "fc_production_snapshot.h5";
  write_snapshot(file.string(), "test", in, j.run, j.result, j.references, {});
  Snapshot s = read_snapshot(H5Reader(file.string()));
  std::filesystem::remove(file);
  REQUIRE(s.run.production.results.size() == j.run.production.results.size());
  REQUIRE(!s.run.production.results.empty());
  const CaseResult replayed = judge_run(s.impl, s.file.inputs, s.file.description, s.run);
  CHECK(same_divergence(replayed.divergence, j.result.divergence, true));
}

}  // namespace fc

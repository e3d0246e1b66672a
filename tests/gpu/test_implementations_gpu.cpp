// Every GPU implementation under the full trace (its trace build, for fused kernels): it
// passes its bounds on 200 seeded cases of mixed shapes, masks, dtypes and distributions.
#include "catch.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"
#include "harness/random_cases.h"

namespace fc {
namespace {
void require_passes_200_cases(const std::string& name) {
  std::unique_ptr<Implementation> impl = make_implementation(name);
  REQUIRE(impl);
  int passed = 0, ran = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const CaseSpec spec = random_case(seed, false).spec;
    const AttentionInputs in = generate_inputs(spec);
    const DeviceInputs device(in, nullptr);
    const CaseResult r = judge_case(*impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), &device);
    INFO(name << " " << spec.label() << ": " << verdict_name(r.verdict) << " " << r.reason
              << (r.divergence ? r.divergence->output + " " + r.divergence->cause + ": " + r.divergence->evidence
                               : std::string()));
    CHECK((r.verdict == Verdict::pass || r.verdict == Verdict::skipped));
    passed += r.verdict == Verdict::pass ? 1 : 0;
    ran += r.verdict == Verdict::skipped ? 0 : 1;
  }
  CHECK(ran == 200);  // the random cases use D 64 and 128, which every implementation runs
  CHECK(passed == 200);
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
TEST_CASE("flash-splitkv passes the trace on 200 seeded cases", "[gpu][splitkv]") {
  require_passes_200_cases("flash-splitkv");
}

}  // namespace fc

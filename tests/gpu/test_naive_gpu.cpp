// The naive CUDA implementation under the full trace: it passes its bounds everywhere.
#include "catch.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"
#include "support/random_cases.h"

namespace fc {

TEST_CASE("naive passes the trace on 200 seeded cases of mixed shapes, masks and distributions", "[gpu][naive]") {
  std::unique_ptr<Implementation> naive = make_implementation("naive");
  REQUIRE(naive);
  int passed = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const CaseSpec spec = test::random_case(seed, false).spec;
    const AttentionInputs in = generate_inputs(spec);
    const DeviceInputs device(in, nullptr);
    const CaseResult r = judge_case(*naive, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), &device);
    INFO(spec.label() << ": " << verdict_name(r.verdict) << " " << r.reason
                      << (r.divergence ? r.divergence->output + " " + r.divergence->evidence : std::string()));
    CHECK(r.verdict == Verdict::pass);
    passed += r.verdict == Verdict::pass ? 1 : 0;
  }
  CHECK(passed == 200);
}

}  // namespace fc

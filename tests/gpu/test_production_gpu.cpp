// What ships is judged on the GPU: the fused kernels' production instantiations against
// their trace builds. A switch that scales only the production epilogue must be reported as
// trace-build-mismatch at the first result of the production build; clean, the two builds
// agree bit for bit.
#include "catch.h"
#include "harness/inputs.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"

namespace fc {

TEST_CASE("a production-only epilogue defect of a fused kernel is trace-build-mismatch", "[gpu][production]") {
  for (const char* name : {"wmma-fused", "flash-splitkv"}) {
    std::unique_ptr<Implementation> impl = make_implementation(name);
    REQUIRE(impl);
    CaseSpec spec;
    spec.shape = {2, 4, 200, 333, 64};
    spec.mask = "causal-br";
    spec.seed = 11;
    const AttentionInputs in = generate_inputs(spec);
    const DeviceInputs device(in, nullptr);
    const CaseDescription d = describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed);
    INFO(name);

    const CaseResult clean = judge_case(*impl, in, d, &device);
    CHECK(clean.verdict == Verdict::pass);
    int compared = 0;
    for (const OutputResult& o : clean.outputs) {
      if (!o.production) continue;
      ++compared;
      CHECK(o.compared_with_trace);
      CHECK(o.local.max_abs_error == 0);  // the builds agree bit for bit
    }
    CHECK(compared >= 1);

    impl->inject("production-epilogue-scale");
    const CaseResult faulty = judge_case(*impl, in, d, &device);
    REQUIRE(faulty.divergence);
    CHECK(faulty.divergence->cause == "trace-build-mismatch");
    CHECK(faulty.divergence->output.find("(production)") != std::string::npos);
    CHECK(faulty.divergence->index == Index4{0, 0, 0, 0});
  }
}

}  // namespace fc

// cublaslt-paged over groups of K/V heads (kernels/cublaslt_paged/cublaslt_paged.h): at a
// group size that splits the heads unevenly, every case and seeded fault is judged as with
// the whole problem in one group: same verdict, and a divergence at the same stage, element
// and cause, and the lint's findings on the same stages. The stage outputs reach the tap in
// blocks of rows, one per group.
#include <set>

#include "catch.h"
#include "harness/inputs.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"
#include "kernels/cublaslt_paged/cublaslt_paged.h"

namespace fc {
namespace {

std::set<std::size_t> stages_with_findings(const CaseResult& r) {
  std::set<std::size_t> stages;
  for (const DescriptorReport& d : r.descriptors) {
    if (!d.findings.empty()) stages.insert(d.stage);
  }
  return stages;
}

}  // namespace

TEST_CASE("cublaslt-paged in groups of K/V heads is judged as in one group", "[gpu][paged]") {
  std::vector<std::string> faults{""};
  for (const std::string& f : make_cublaslt_paged()->faults()) faults.push_back(f);
  std::set<std::string> diverged;  // the faults that made the whole schedule diverge somewhere
  for (const Shape& shape : {Shape{2, 4, 130, 300, 64}, Shape{2, 6, 130, 300, 64, 2}}) {
    for (const char* mask : {"none", "padding=40,300", "causal-br"}) {
      CaseSpec spec;
      spec.shape = shape;
      spec.mask = mask;
      spec.seed = 9;
      const AttentionInputs in = generate_inputs(spec);
      const DeviceInputs device(in, nullptr);
      const CaseDescription d = describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed);
      for (const std::string& fault : faults) {
        INFO(shape.to_string() << " " << mask << " fault '" << fault << "'");
        std::unique_ptr<Implementation> whole = make_cublaslt_paged();
        std::unique_ptr<Implementation> groups = make_cublaslt_paged({128, 3 * shape.group() * shape.q_len});
        whole->inject(fault);
        groups->inject(fault);
        const CaseResult a = judge_case(*whole, in, d, &device);
        const CaseResult b = judge_case(*groups, in, d, &device);
        if (a.divergence) diverged.insert(fault);
        INFO("whole: " << a.reason << "; groups: " << b.reason);
        CHECK(a.verdict == b.verdict);
        if (fault.empty()) CHECK(b.verdict == Verdict::pass);
        REQUIRE(a.divergence.has_value() == b.divergence.has_value());
        if (!a.divergence) continue;
        CHECK(a.divergence->stage == b.divergence->stage);
        CHECK(a.divergence->index == b.divergence->index);
        CHECK(a.divergence->cause == b.divergence->cause);
        // A call the lint stops is reported in either schedule, whichever group it is in.
        CHECK(stages_with_findings(a) == stages_with_findings(b));
      }
    }
  }
  // The seeded faults take effect: most diverge (some need what these cases lack, a fully
  // masked row or scores that overflow), the clean run never.
  CHECK(diverged.count("") == 0);
  CHECK(diverged.size() * 2 >= faults.size());
}

}  // namespace fc

// flashcore-check describe --impl NAME [--shape ...]: an implementation's cuBLASLt calls,
// built and read back on the CPU, linted, without running a kernel.
#include <iostream>
#include <utility>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "kernels/implementation.h"
#include "reports/descriptors.h"

namespace fc {

int run_describe(const DescribeCommand& command) {
  std::vector<std::unique_ptr<Implementation>> chosen = select_implementations({command.impl});
  if (!command.inject.empty()) chosen = with_fault(std::move(chosen), command.inject);
  Implementation& impl = *chosen.front();
  const std::vector<CaseSpec> cases = plan_cases(command.plan);
  bool any = false;
  int stopped = 0;  // calls lint kept from launching: what --trace reports as a divergence
  for (const CaseSpec& spec : cases) {
    const Problem problem = make_problem(spec);  // descriptors need no tensor values
    const std::vector<DescriptorReport> reports = impl.describe(problem);
    if (reports.empty()) continue;
    any = true;
    std::cout << impl.name() << " | " << spec.label() << "\n";
    const StageGraph graph = impl.stage_graph(problem);
    write_descriptors(std::cout, &graph, reports);
    std::cout << "\n";
    for (const DescriptorReport& r : reports) stopped += r.findings.empty() ? 0 : 1;  // as kernels/common/lt_gemm.cpp decides
  }
  if (!any) std::cout << impl.name() << " makes no cuBLASLt calls\n";
  if (stopped > 0) std::cout << stopped << " cuBLASLt call" << (stopped == 1 ? "" : "s") << " stopped by lint before launch\n";
  return stopped > 0 ? kExitDiverged : kExitPass;
}

}  // namespace fc

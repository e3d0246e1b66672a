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
  std::unique_ptr<Implementation> impl = std::move(select_implementations({command.impl}).front());
  impl->inject(command.inject);
  bool any = false;
  for (const CaseSpec& spec : plan_cases(command.plan)) {
    const Problem problem = make_problem(spec);  // descriptors need no tensor values
    const std::vector<DescriptorReport> reports = impl->describe(problem);
    if (reports.empty()) continue;
    any = true;
    std::cout << impl->name() << " | " << spec.label() << "\n";
    const StageGraph graph = impl->stage_graph(problem);
    write_descriptors(std::cout, &graph, reports);
    std::cout << "\n";
  }
  if (!any) std::cout << impl->name() << " makes no cuBLASLt calls\n";
  return kExitPass;
}

}  // namespace fc

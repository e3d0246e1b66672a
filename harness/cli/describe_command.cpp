// flashcore-check describe --impl NAME [--shape ...]: an implementation's stage graph as it
// declares it for each case, and its cuBLASLt calls, built and read back on the CPU, linted,
// without running a kernel.
#include <iostream>
#include <utility>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "kernels/implementation.h"
#include "reports/descriptors.h"

namespace fc {
namespace {

void write_stage_graph(std::ostream& out, const StageGraph& graph) {
  out << "  stage graph: " << graph.algorithm.describe() << "\n";
  for (const Stage& stage : graph.stages) {
    out << "    " << stage.name() << (stage.reads_own_output ? " (in place):" : ":");
    for (std::size_t i = 0; i < stage.outputs.size(); ++i) {
      const StageOutput& o = stage.outputs[i];
      out << (i ? ", " : " ") << (o.name.empty() ? "" : o.name + " ") << quantity_name(o.quantity) << " "
          << dtype_name(o.dtype);
    }
    out << "\n";
  }
  out << "  arithmetic (out/operand/accumulator):";
  for (StageKind kind : {StageKind::qk, StageKind::softmax, StageKind::rescale, StageKind::pv, StageKind::normalize,
                         StageKind::lse, StageKind::combine}) {
    const Arithmetic& a = arithmetic_of(graph.arithmetic, kind);
    out << " " << stage_kind_name(kind) << " " << dtype_name(a.out) << "/" << dtype_name(a.operand) << "/"
        << dtype_name(a.accumulate) << (a.tensor_cores ? " tc" : "") << (kind == StageKind::combine ? "\n" : ";");
  }
}

}  // namespace

int run_describe(const DescribeCommand& command) {
  std::vector<std::unique_ptr<Implementation>> chosen = select_implementations({command.impl});
  if (!command.inject.empty()) chosen = with_fault(std::move(chosen), command.inject);
  Implementation& impl = *chosen.front();
  const std::vector<CaseSpec> cases = plan_cases(command.plan);
  int stopped = 0;  // calls lint kept from launching: what --trace reports as a divergence
  for (const CaseSpec& spec : cases) {
    const Problem problem = make_problem(spec);  // descriptors need no tensor values
    std::cout << impl.name() << " | " << spec.label() << "\n";
    if (const std::optional<std::string> why = impl.unsupported(problem)) {
      std::cout << "  not run on this case: " << *why << "\n\n";
      continue;
    }
    const StageGraph graph = impl.stage_graph(problem);
    write_stage_graph(std::cout, graph);
    const std::vector<DescriptorReport> reports = impl.describe(problem);
    if (reports.empty()) std::cout << "  " << impl.name() << " makes no cuBLASLt calls\n";
    write_descriptors(std::cout, &graph, reports);
    std::cout << "\n";
    for (const DescriptorReport& r : reports) stopped += r.findings.empty() ? 0 : 1;  // as kernels/common/lt_gemm.cpp decides
  }
  if (stopped > 0) std::cout << stopped << " cuBLASLt call" << (stopped == 1 ? "" : "s") << " stopped by lint before launch\n";
  return stopped > 0 ? kExitDiverged : kExitPass;
}

}  // namespace fc

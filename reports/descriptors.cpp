#include "reports/descriptors.h"

#include "stages/cublaslt/descriptor_dump.h"

namespace fc {

void write_descriptors(std::ostream& out, const StageGraph* graph, const std::vector<DescriptorReport>& reports) {
  for (const DescriptorReport& r : reports) {
    out << "  cuBLASLt call of stage ";
    if (graph && r.stage < graph->stages.size()) out << graph->stages[r.stage].name(); else out << r.stage;
    out << (!r.launched && !r.findings.empty() ? " (lint stopped the launch)" : "") << "\n";
    dump(out, r.record);
    for (const LintFinding& f : r.findings) out << "    LINT " << f.rule << " [" << f.operand << "]: " << f.message << "\n";
  }
}

}  // namespace fc

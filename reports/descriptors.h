#pragma once
// cuBLASLt calls of a case, as text: for each, its stage, the descriptors read back from
// cuBLASLt, and the lint findings.
#include <ostream>
#include <vector>

#include "stages/descriptor_report.h"
#include "stages/stage.h"

namespace fc {

void write_descriptors(std::ostream& out, const StageGraph* graph, const std::vector<DescriptorReport>& reports);

}  // namespace fc

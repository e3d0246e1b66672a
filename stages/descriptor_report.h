#pragma once
// What an implementation reports for each cuBLASLt call: the descriptors as cuBLASLt holds
// them (read back) and the lint findings, tied to the stage the call belongs to.
#include <cstddef>
#include <vector>

#include "stages/cublaslt/descriptor_record.h"
#include "stages/cublaslt/lint.h"

namespace fc {

struct DescriptorReport {
  std::size_t stage = 0;
  MatmulRecord record;
  std::vector<LintFinding> findings;
  bool launched = false;  // false when lint stopped the call
};

}  // namespace fc

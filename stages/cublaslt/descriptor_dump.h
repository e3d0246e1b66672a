#pragma once
// A readable, multi-line account of a MatmulRecord: the descriptor, one line per layout, the
// preference, the chosen algorithm and its heuristic result, then every Set with the failing
// ones marked. Fields whose Get failed read "<get failed: STATUS>".
#include <ostream>
#include <string>

#include "stages/cublaslt/descriptor_record.h"

namespace fc {

void dump(std::ostream& out, const MatmulRecord& record);

// "A: CUDA_R_16F COL rows 64 cols 128 ld 64 batch 256 stride 8192"
std::string layout_line(const LayoutRecord& layout);

// "layout B: STRIDED_BATCH_OFFSET = 2048 (4 bytes; int64 expected) FAILED 7 CUBLAS_STATUS_INVALID_VALUE"
std::string set_line(const SetEntry& entry);

// The bytes a Set was given, read as an integer of their size (signed when the attribute's
// documented type is), or as hex when their size is no integer's.
std::string set_value_text(const SetEntry& entry);

}  // namespace fc

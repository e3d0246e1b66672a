#pragma once
// Reading and writing one head's block of a host buffer as an FP64 matrix, converting from
// and to the buffer's format: how the CPU implementations pass data between their stages
// through memory, as GPU kernels do, so poison and faults travel the same way.
#include "reference/matrix.h"
#include "stages/workspace.h"

namespace fc::emu {

// Block `index` of size rows x cols (row-major) of a dense buffer.
MatrixR read_block(const Buffer& buffer, std::int64_t index, std::int64_t rows, std::int64_t cols);
void write_block(Buffer& buffer, std::int64_t index, const MatrixR& block);

}  // namespace fc::emu

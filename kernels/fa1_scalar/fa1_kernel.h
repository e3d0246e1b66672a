#pragma once
#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "kernels/wmma_fused/flash_params.h"

namespace fc {
inline constexpr int kFa1Keys = 32;  // keys per tile
// Scalar flash attention (FA-1 style) with the same parameters and trace layout as the
// fused tensor-core kernel; params.tiles_per_split covers all keys (one split).
void launch_fa1(const FlashParams& params, int head_dim, DType dtype, bool trace, cudaStream_t stream);
}  // namespace fc

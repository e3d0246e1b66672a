#pragma once
// Host side of the fused kernel: one entry point that picks the compiled variant.
#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "kernels/wmma_fused/flash_params.h"

namespace fc {

struct FlashVariant {
  bool trace = false;         // write the per-tile trace buffers
  bool split = false;         // write partial outputs and lse (split-KV)
  bool missing_sync = false;  // fault injection (wmma-fused only)
};

bool flash_supports_head_dim(int head_dim);  // 64 and 128
void launch_flash_forward(const FlashParams& params, int head_dim, DType dtype, FlashVariant variant,
                          cudaStream_t stream);

}  // namespace fc

#pragma once
// Host side of the fused kernel: one entry point that picks the compiled variant, and what
// the fused kernels can run.
#include <cuda_runtime_api.h>

#include <optional>
#include <string>

#include "core/problem.h"
#include "kernels/wmma_fused/flash_params.h"

namespace fc {

struct FlashVariant {
  bool trace = false;         // write the per-tile trace buffers
  bool split = false;         // write partial outputs and lse (split-KV)
  bool paged = false;         // read K and V from the paged cache (single split only)
  bool missing_sync = false;  // fault injection (wmma-fused only, D 64)
};

bool flash_supports_head_dim(int head_dim);  // 32, 64, 96, 128, 256
// Why the fused kernel cannot run a problem, in one line, if it cannot: a head dim not
// built, ALiBi, or a finite bias below -FLT_MAX ln 2, which its base-2 fp32 scores cannot hold.
std::optional<std::string> flash_unsupported(const Problem& problem);
void launch_flash_forward(const FlashParams& params, int head_dim, DType dtype, FlashVariant variant,
                          cudaStream_t stream);

}  // namespace fc

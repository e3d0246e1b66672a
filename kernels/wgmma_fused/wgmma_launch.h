#pragma once
// Host side of wgmma-fused's kernel: what it can run, and one entry point that builds the
// tensor maps and picks the compiled variant.
#include <cuda_runtime_api.h>

#include <optional>
#include <string>

#include "core/problem.h"
#include "kernels/wgmma_fused/wgmma_params.h"

namespace fc {

// What the tensor maps span beside the shape: the rows of the packed q and k/v buffers of a
// varlen problem (FlashParams::q_offsets set), and the blocks of a paged cache
// (FlashParams::block_table set).
struct InputExtents {
  std::int64_t q_rows = 0, kv_rows = 0, cache_blocks = 0;
};

struct WgmmaVariant {
  bool trace = false;
  PipelineFault fault = PipelineFault::none;
};

// Why the kernel cannot run a problem on this build and device, in one line, if it cannot.
std::optional<std::string> wgmma_unsupported(const Problem& problem);
void launch_wgmma_forward(const FlashParams& params, int head_dim, DType dtype, WgmmaVariant variant,
                          InputExtents extents, cudaStream_t stream);

}  // namespace fc

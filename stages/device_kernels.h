#pragma once
// Host entry points of the stage-level device kernels (stages/flags_kernel.cu).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "stages/flags.h"

namespace fc {

// One pass over a device tensor (fp32, fp16 or bf16), accumulating into *slot, which must
// hold a fresh FlagCounts{} (zeros, first indices kNoIndex) or the flags of other blocks of
// the same tensor. First indices are index_base + the storage offset from view.data.
void launch_flags(const TensorView& view, FlagCounts* slot, cudaStream_t stream, std::uint64_t index_base = 0);

// Fills `count` elements with the poison pattern of buffer `id`.
void launch_poison_fill(void* data, DType dtype, std::int64_t count, int id, cudaStream_t stream);

// Fills the shared memory of every SM with kSharedMemoryPoison: a kernel that reads shared
// memory before it writes it (a missing barrier or wait) reads NaN, not the data an earlier
// launch left there, which may well be the right values.
void launch_poison_shared_memory(cudaStream_t stream);

}  // namespace fc

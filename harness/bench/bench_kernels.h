#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace fc {
// Fills a device buffer with finite pseudo-random values in [-1, 1) (never zeros: a
// benchmark on zeros can run faster than real data).
void launch_fill_random(void* data, DType dtype, std::int64_t count, std::uint32_t seed, cudaStream_t stream);
}  // namespace fc

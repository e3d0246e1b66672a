#pragma once
#include <cuda_runtime_api.h>

#include "core/dtype.h"

namespace fc {
// out[row] = sum_t w_t partial[t][row] / sum_t w_t with w_t = exp(lse_t - max_t lse_t); a
// split with lse -inf (every key masked) weighs 0, a row whose every split is empty is 0.
// lse[row] = max_t lse_t + log(sum_t w_t) (-inf for a row with no key).
// `guard_empty` false is the combine-empty-split fault: a row whose every split is empty
// computes exp(-inf - (-inf)).
void launch_combine(const float* partial_out, const float* partial_lse, int splits, long long rows, int head_dim,
                    DType dtype, void* out, float* lse, bool guard_empty, cudaStream_t stream);
}  // namespace fc

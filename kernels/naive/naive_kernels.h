#pragma once
// The three plain kernels of the naive implementation (fp32 accumulation throughout).
#include <cuda_runtime_api.h>

#include "core/problem.h"
#include "kernels/common/device_mask.h"

namespace fc {

// scores [B,H,Sq,Sk] fp32 = scale q k^T + mask.
void launch_naive_qk(const void* q, const void* k, DType dtype, const Shape& s, float scale, const DeviceMask& mask,
                     float* scores, cudaStream_t stream);
// probs [B,H,Sq,Sk], row max and row sum [B,H,Sq], all fp32; a fully masked row gives 0s.
void launch_naive_softmax(const float* scores, const Shape& s, float* probs, float* row_max, float* row_sum,
                          cudaStream_t stream);
// out [B,H,Sq,D] in the input format = probs v.
void launch_naive_pv(const float* probs, const void* v, DType dtype, const Shape& s, void* out, cudaStream_t stream);

}  // namespace fc

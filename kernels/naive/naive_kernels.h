#pragma once
// The three plain kernels of the naive implementation (fp32 accumulation throughout).
#include <cuda_runtime_api.h>

#include "core/problem.h"
#include "kernels/common/device_mask.h"

namespace fc {

// Fault injection (docs/faults.md), all off on the clean path.
struct NaiveFaults {
  bool fp16_scores = false;         // scores stored in fp16 before the scale
  bool no_max_subtract = false;     // exp(s) without the row max
  bool masked_row_nan = false;      // no guard for a row with no key
  bool kv_head_modulo = false;      // gqa-head-mod: K/V head h % Hkv instead of h / group
  bool softcap_after_mask = false;  // softcap-after-mask: c tanh((s + bias) / c)
  bool row_offset_32 = false;       // index-overflow-32: a score row's byte offset held in 32 bits
};

// scores [B,H,Sq,Sk] = scale q k^T + mask, fp32 (fp16 and unscaled with fp16_scores); with a
// softcap c > 0, c tanh(scale q k^T / c) + mask. Query head h reads K/V head h / (H / Hkv).
void launch_naive_qk(const void* q, const void* k, DType dtype, const Shape& s, float scale, float softcap,
                     const DeviceMask& mask, void* scores, NaiveFaults faults, cudaStream_t stream);
// probs [B,H,Sq,Sk], row max and row sum [B,H,Sq], all fp32; a fully masked row gives 0s.
void launch_naive_softmax(const void* scores, float scale, const Shape& s, float* probs, float* row_max, float* row_sum,
                          NaiveFaults faults, cudaStream_t stream);
// out [B,H,Sq,D] in the input format = probs v.
void launch_naive_pv(const float* probs, const void* v, DType dtype, const Shape& s, void* out, NaiveFaults faults,
                     cudaStream_t stream);

}  // namespace fc

#pragma once
// The mask as device code reads it: a POD of the parts of fc::Mask (core/problem.h), and
// the additive term of one score. Kernels write their own version of the rule; the FP64
// reference has its own, so a bug in one is caught by the other.
#include <cstdint>

namespace fc {

struct DeviceMask {
  int causal = 0;                      // 0 none, 1 top-left, 2 bottom-right
  long long causal_offset = 0;         // Sk - Sq for bottom-right
  const int* key_lengths = nullptr;    // [B] or null
  const void* dense = nullptr;         // null, bool bytes (1 = attend) or fp32 bias
  int dense_is_bias = 0;
  long long dense_batch_stride = 0;    // 0 when broadcast over batch
  long long dense_head_stride = 0;     // 0 when broadcast over heads
  long long dense_row_stride = 0;      // Sk
};

#if defined(__CUDACC__)
// 0, -inf or the bias for query i, key j of head (b, h).
__device__ __forceinline__ float device_mask_bias(const DeviceMask& m, int b, int h, long long i, long long j) {
  const float kMasked = -__int_as_float(0x7F800000);
  if (m.causal == 1 && j > i) return kMasked;
  if (m.causal == 2 && j > i + m.causal_offset) return kMasked;
  if (m.key_lengths && j >= m.key_lengths[b]) return kMasked;
  if (!m.dense) return 0.0f;
  const long long at = b * m.dense_batch_stride + h * m.dense_head_stride + i * m.dense_row_stride + j;
  if (m.dense_is_bias) return static_cast<const float*>(m.dense)[at];
  return static_cast<const unsigned char*>(m.dense)[at] ? 0.0f : kMasked;
}
#endif

}  // namespace fc

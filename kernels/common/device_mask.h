#pragma once
// The mask as the implementations read it: a POD of the parts of fc::Mask and of the
// sequence lengths (core/problem.h), and the additive term of one score. GPU kernels read it
// with device pointers, the CPU implementations with host pointers (kernels/common/host_mask.h).
// The implementations write their own version of the rule; the FP64 reference has its own
// (mask_bias), so a bug in one is caught by the other.
#include <cstdint>

#include "core/host_device.h"

namespace fc {

struct DeviceMask {
  int causal = 0;                      // 0 none, 1 top-left, 2 bottom-right
  long long causal_offset = 0;         // Sk - Sq of the padded shape
  const int* q_lens = nullptr;         // [B] varlen: query rows of each sequence, or null
  const int* kv_lens = nullptr;        // [B] varlen: keys of each sequence (then Sk - Sq is theirs)
  const int* key_lengths = nullptr;    // [B] key padding, or null
  int window_left = -1, window_right = -1;  // -1: unbounded
  const float* alibi_slopes = nullptr; // [H] or null
  const void* dense = nullptr;         // null, bool bytes (1 = attend) or fp32 bias
  int dense_is_bias = 0;
  long long dense_batch_stride = 0;    // 0 when broadcast over batch
  long long dense_head_stride = 0;     // 0 when broadcast over heads
  long long dense_row_stride = 0;      // Sk
  // Fault injection (window-off-by-one): the window's left edge one key too far right, so
  // the oldest key of every window is dropped.
  int window_off_by_one = 0;

  FC_HOST_DEVICE bool any() const {
    return causal != 0 || q_lens || key_lengths || window_left >= 0 || window_right >= 0 || alibi_slopes || dense;
  }
};

// Sk - Sq of sequence b: the offset of bottom-right alignment.
FC_HOST_DEVICE inline long long mask_diagonal(const DeviceMask& m, int b) {
  return m.kv_lens ? static_cast<long long>(m.kv_lens[b]) - m.q_lens[b] : m.causal_offset;
}

// 0, -inf or the bias for query i, key j of head (b, h); -inf where row i or key j does not
// exist in sequence b.
FC_HOST_DEVICE inline float device_mask_bias(const DeviceMask& m, int b, int h, long long i, long long j) {
  const float kMasked = -__builtin_huge_valf();
  if (m.kv_lens && (i >= m.q_lens[b] || j >= m.kv_lens[b])) return kMasked;
  const long long diagonal = mask_diagonal(m, b);
  if (m.causal == 1 && j > i) return kMasked;
  if (m.causal == 2 && j > i + diagonal) return kMasked;
  if (m.key_lengths && j >= m.key_lengths[b]) return kMasked;
  if (m.window_left >= 0 && j < i + diagonal - m.window_left + m.window_off_by_one) return kMasked;
  if (m.window_right >= 0 && j > i + diagonal + m.window_right) return kMasked;
  float bias = 0.0f;
  if (m.dense) {
    const long long at = b * m.dense_batch_stride + h * m.dense_head_stride + i * m.dense_row_stride + j;
    if (m.dense_is_bias) {
      bias = static_cast<const float*>(m.dense)[at];
    } else if (!static_cast<const unsigned char*>(m.dense)[at]) {
      return kMasked;
    }
  }
  if (m.alibi_slopes) {
    const long long distance = i - j + diagonal;
    bias -= m.alibi_slopes[h] * static_cast<float>(distance < 0 ? -distance : distance);
  }
  return bias;
}

}  // namespace fc

#pragma once
// The mask of one (batch, query head) as plain values, so that the bias of a (row, key) is
// computed the same way wherever the reference runs: on the host (mask_bias, a head's bias
// matrix) or on a GPU that forms a block's bias beside its scores (reference/gpu/).
#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/problem.h"

namespace fc {

struct HeadMask {
  std::int64_t q_len = 0, kv_len = 0;  // the sequence's own lengths (varlen)
  std::int64_t diagonal = 0;           // Sk - Sq of the sequence: bottom-right alignment
  Causal causal = Causal::none;
  std::int64_t key_length = -1;        // keys >= it are masked (padding); -1: no such part
  std::int64_t window_left = -1, window_right = -1;
  bool alibi = false;
  double alibi_slope = 0;
  // The dense part [Sq, Sk] of this head: the caller reads its element (row i, key j) at
  // dense_index(i, j) of the problem's dense tensor and passes it in; boolean (0 masks) or an
  // additive bias.
  bool dense = false, dense_is_bias = false;
  std::int64_t dense_offset = 0, dense_row_stride = 0;

  FC_HOST_DEVICE std::int64_t dense_index(std::int64_t i, std::int64_t j) const {
    return dense_offset + i * dense_row_stride + j;
  }

  // 0 when attended, -inf when masked (or row i or key j does not exist), else the bias.
  FC_HOST_DEVICE double bias(std::int64_t i, std::int64_t j, double dense_value) const {
    const double masked = -HUGE_VAL;
    if (i >= q_len || j >= kv_len) return masked;
    if (causal == Causal::top_left && j > i) return masked;
    if (causal == Causal::bottom_right && j > i + diagonal) return masked;
    if (key_length >= 0 && j >= key_length) return masked;
    if (window_left >= 0 && j < i + diagonal - window_left) return masked;
    if (window_right >= 0 && j > i + diagonal + window_right) return masked;
    double b = 0;
    if (dense) {
      if (!dense_is_bias) {
        if (dense_value == 0) return masked;
      } else {
        b = dense_value;
      }
    }
    if (alibi) b -= alibi_slope * std::fabs(static_cast<double>(i - j + diagonal));
    return b;
  }
};

HeadMask head_mask(const Problem& problem, std::int64_t b, std::int64_t h);

}  // namespace fc

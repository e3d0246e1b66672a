#include "kernels/common/host_mask.h"

#include <algorithm>

namespace fc {

HostMask::HostMask(const Problem& p) {
  const Shape& s = p.shape;
  const Mask& m = p.mask;
  mask_.causal = m.causal == Causal::top_left ? 1 : m.causal == Causal::bottom_right ? 2 : 0;
  mask_.causal_offset = s.kv_len - s.q_len;
  if (p.layout.varlen()) {
    q_lens.assign(p.layout.q_lens.begin(), p.layout.q_lens.end());
    kv_lens.assign(p.layout.kv_lens.begin(), p.layout.kv_lens.end());
    mask_.q_lens = q_lens.data();
    mask_.kv_lens = kv_lens.data();
  }
  if (!m.key_lengths.empty()) {
    key_lengths.assign(m.key_lengths.begin(), m.key_lengths.end());
    mask_.key_lengths = key_lengths.data();
  }
  // A side wider than Sq + Sk keeps every key, as an unbounded one does: clamped, it fits an int.
  const std::int64_t widest = s.q_len + s.kv_len;
  mask_.window_left = static_cast<int>(std::min(m.window.left, widest));
  mask_.window_right = static_cast<int>(std::min(m.window.right, widest));
  if (m.has_alibi()) {
    alibi_slopes.assign(m.alibi_slopes.begin(), m.alibi_slopes.end());
    mask_.alibi_slopes = alibi_slopes.data();
  }
  if (m.has_dense()) {
    // A float mask is read as fp32 (the harness converts float masks to fp32 when it loads a case).
    dense = m.dense_is_bias() ? m.dense.to(DType::f32) : m.dense;
    mask_.dense = dense.data();
    mask_.dense_is_bias = m.dense_is_bias() ? 1 : 0;
    const Dims& d = m.dense.dims();
    mask_.dense_row_stride = s.kv_len;
    mask_.dense_head_stride = d[1] == 1 ? 0 : s.q_len * s.kv_len;
    mask_.dense_batch_stride = d[0] == 1 ? 0 : d[1] * s.q_len * s.kv_len;
  }
}

}  // namespace fc

#include "core/packed.h"

#include <algorithm>
#include <cstring>

namespace fc {
namespace {

// Copies row r of head h of batch b of a padded [B,H,S,D] tensor to row `to` of head h of a
// [rows, H, D] one.
void copy_row(const HostTensor& padded, std::int64_t b, std::int64_t h, std::int64_t r, HostTensor& rows,
              std::int64_t to) {
  const Dims& d = padded.dims();
  const std::size_t width = static_cast<std::size_t>(d[3]) * dtype_size(padded.dtype());
  const auto* from = static_cast<const std::uint8_t*>(padded.data()) + (((b * d[1] + h) * d[2] + r) * d[3]) * dtype_size(padded.dtype());
  auto* into = static_cast<std::uint8_t*>(rows.data()) + ((to * d[1] + h) * d[3]) * dtype_size(padded.dtype());
  std::memcpy(into, from, width);
}

}  // namespace

std::int64_t paged_row(const Layout& l, std::int64_t table_stride, std::int64_t b, std::int64_t j) {
  const std::int64_t block = l.block_table[static_cast<std::size_t>(b * table_stride + j / l.block_size)];
  return block * l.block_size + j % l.block_size;
}

PackedInputs pack_inputs(const AttentionInputs& in) {
  const Problem& p = in.problem;
  const Shape& s = p.shape;
  const std::int64_t kv_heads = s.kv_head_count();
  PackedInputs out;
  if (p.layout.varlen()) {
    out.cu_seqlens_q.push_back(0);
    out.cu_seqlens_k.push_back(0);
    for (std::int64_t b = 0; b < s.batch; ++b) {
      out.cu_seqlens_q.push_back(out.cu_seqlens_q.back() + static_cast<std::int32_t>(p.q_len_of(b)));
      out.cu_seqlens_k.push_back(out.cu_seqlens_k.back() + static_cast<std::int32_t>(p.kv_len_of(b)));
    }
    const std::int64_t spare = std::max(s.q_len, s.kv_len);
    out.q = HostTensor(p.dtype, {out.cu_seqlens_q.back() + spare, s.heads, s.head_dim});
    out.k = HostTensor(p.dtype, {out.cu_seqlens_k.back() + spare, kv_heads, s.head_dim});
    out.v = HostTensor(p.dtype, {out.cu_seqlens_k.back() + spare, kv_heads, s.head_dim});
    for (std::int64_t b = 0; b < s.batch; ++b) {
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t i = 0; i < p.q_len_of(b); ++i) copy_row(in.q, b, h, i, out.q, out.cu_seqlens_q[b] + i);
      for (std::int64_t h = 0; h < kv_heads; ++h)
        for (std::int64_t j = 0; j < p.kv_len_of(b); ++j) {
          copy_row(in.k, b, h, j, out.k, out.cu_seqlens_k[b] + j);
          copy_row(in.v, b, h, j, out.v, out.cu_seqlens_k[b] + j);
        }
    }
  }
  if (p.layout.paged()) {
    const Layout& l = p.layout;
    out.k_cache = HostTensor(p.dtype, {l.num_blocks, l.block_size, kv_heads, s.head_dim});
    out.v_cache = HostTensor(p.dtype, {l.num_blocks, l.block_size, kv_heads, s.head_dim});
    // As [num_blocks * block_size, Hkv, D] rows.
    HostTensor k_rows = out.k_cache.reshaped({l.num_blocks * l.block_size, kv_heads, s.head_dim});
    HostTensor v_rows = out.v_cache.reshaped({l.num_blocks * l.block_size, kv_heads, s.head_dim});
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < kv_heads; ++h)
        for (std::int64_t j = 0; j < p.kv_len_of(b); ++j) {
          const std::int64_t row = paged_row(l, l.max_blocks, b, j);
          copy_row(in.k, b, h, j, k_rows, row);
          copy_row(in.v, b, h, j, v_rows, row);
        }
    out.k_cache = k_rows.reshaped(out.k_cache.dims());
    out.v_cache = v_rows.reshaped(out.v_cache.dims());
  }
  return out;
}

}  // namespace fc

#include "kernels/cpu_emulated/head_reader.h"

#include "reference/matrix.h"

namespace fc::emu {

HeadReader::HeadReader(const AttentionInputs& inputs, bool layout, ReadFaults faults)
    : in_(inputs), layout_(layout), faults_(faults), host_mask_(inputs.problem), mask_(host_mask_.mask()) {
  if (layout_) packed_ = pack_inputs(inputs);
  const Layout& l = inputs.problem.layout;
  if (layout_ && l.paged()) {  // the cache as [num_blocks * block_size, Hkv, D] rows
    const Shape& s = inputs.problem.shape;
    packed_.k_cache = packed_.k_cache.reshaped({l.num_blocks * l.block_size, s.kv_head_count(), s.head_dim});
    packed_.v_cache = packed_.v_cache.reshaped({l.num_blocks * l.block_size, s.kv_head_count(), s.head_dim});
  }
  mask_.window_off_by_one = faults.window_off_by_one ? 1 : 0;
}

// Rows [first, first + count) of head `head` of a [rows, heads, D] packed tensor, as a
// [S, D] matrix padded with zeros.
MatrixR HeadReader::rows(const HostTensor& packed, std::int64_t first, std::int64_t count, std::int64_t head,
                         std::int64_t total_rows) const {
  const Dims& d = packed.dims();
  MatrixR m = MatrixR::Zero(total_rows, d[2]);
  for (std::int64_t r = 0; r < count; ++r)
    for (std::int64_t c = 0; c < d[2]; ++c) m(r, c) = packed.get(((first + r) * d[1] + head) * d[2] + c);
  return m;
}

HeadInputs HeadReader::head(std::int64_t b, std::int64_t h, bool bias) const {
  const Problem& p = in_.problem;
  const Shape& s = p.shape;
  const std::int64_t kv_head = faults_.kv_head_modulo ? h % s.kv_head_count() : h / s.group();
  HeadInputs head;
  head.scale = p.scale;
  head.softcap = p.softcap;
  const Layout& l = p.layout;
  if (layout_ && l.varlen()) {
    const std::vector<std::int32_t>& offsets = faults_.q_offsets_from_k ? packed_.cu_seqlens_k : packed_.cu_seqlens_q;
    head.q = rows(packed_.q, offsets[static_cast<std::size_t>(b)], p.q_len_of(b), h, s.q_len);
  } else {
    head.q = head_matrix(in_.q, b, h);
  }
  if (layout_ && l.paged()) {
    const std::int64_t stride = faults_.table_stride ? l.max_blocks - 1 : l.max_blocks;
    MatrixR k = MatrixR::Zero(s.kv_len, s.head_dim), v = MatrixR::Zero(s.kv_len, s.head_dim);
    for (std::int64_t j = 0; j < p.kv_len_of(b); ++j) {
      const std::int64_t at = (paged_row(l, stride, b, j) * s.kv_head_count() + kv_head) * s.head_dim;
      for (std::int64_t c = 0; c < s.head_dim; ++c) {
        k(j, c) = packed_.k_cache.get(at + c);
        v(j, c) = packed_.v_cache.get(at + c);
      }
    }
    head.set_kv(std::move(k), std::move(v));
  } else if (layout_ && l.varlen()) {
    const std::int64_t first = packed_.cu_seqlens_k[static_cast<std::size_t>(b)];
    head.set_kv(rows(packed_.k, first, p.kv_len_of(b), kv_head, s.kv_len),
                rows(packed_.v, first, p.kv_len_of(b), kv_head, s.kv_len));
  } else {
    head.set_kv(head_matrix(in_.k, b, kv_head), head_matrix(in_.v, b, kv_head));
  }
  if (!bias) return head;
  head.bias.resize(s.q_len, s.kv_len);
  for (std::int64_t i = 0; i < s.q_len; ++i)
    for (std::int64_t j = 0; j < s.kv_len; ++j) {
      head.bias(i, j) = device_mask_bias(mask_, static_cast<int>(b), static_cast<int>(h), i, j);
    }
  return head;
}

}  // namespace fc::emu

#pragma once
// The packed (varlen) and paged forms of a case's q, k, v, as FlashAttention's varlen and
// KV-cache kernels read them, built from the padded tensors (core/problem.h, Layout):
//   packed  q [rows, H, D], k and v [rows, Hkv, D]: sequence b's rows at cu_seqlens[b] up to
//           cu_seqlens[b + 1], then max(Sq, Sk) rows of zeros, so that a kernel reading with
//           the wrong offsets (a planted fault) stays inside the buffer;
//   paged   k and v [num_blocks, block_size, Hkv, D]: key j of sequence b in block
//           block_table[b * max_blocks + j / block_size] at row j % block_size; blocks no
//           sequence uses hold zeros.
#include <cstdint>
#include <vector>

#include "core/problem.h"

namespace fc {

struct PackedInputs {
  std::vector<std::int32_t> cu_seqlens_q, cu_seqlens_k;  // [B + 1], varlen problems
  HostTensor q, k, v;                                    // packed, varlen problems (else empty)
  HostTensor k_cache, v_cache;                           // paged problems (else empty)
};

PackedInputs pack_inputs(const AttentionInputs& inputs);

// The row of the paged cache (counting rows of block_size per block) that holds key j of
// sequence b, reading the block table with row stride `table_stride` (max_blocks; another
// stride is the planted block-table fault).
std::int64_t paged_row(const Layout& layout, std::int64_t table_stride, std::int64_t b, std::int64_t j);

}  // namespace fc

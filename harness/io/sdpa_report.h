#pragma once
// A bug report in PyTorch SDPA / FlashAttention form, read from a .npz:
//   q [B,H,Sq,D], k and v [B,Hkv,Sk,D] (Hkv dividing H: GQA, as enable_gqa): float16,
//     float32, or bfloat16 stored as uint16 with a string entry `dtype` = "bfloat16";
//   varlen (flash_attn_varlen_func): q packed [total_q,H,D] with cu_seqlens_q, and/or k, v
//     packed [total_k,Hkv,D] with cu_seqlens_k (int32 [B+1], from 0, never decreasing, ending
//     at the total);
//   paged KV (block_table): k and v [num_blocks,block_size,Hkv,D] with block_table int32
//     [B,max_blocks] and seqused_k int32 [B];
//   attn_mask (optional): bool (True = attend) or float (added to the scores), any shape
//     that broadcasts to [B,H,Sq,Sk] (rank 2 to 4, padded coordinates);
//   scale (optional, 0-d float), is_causal (optional, 0-d bool; top-left, as PyTorch),
//   window_size (optional, int [2]: left, right, -1 unbounded), softcap (optional, > 0),
//   alibi_slopes (optional, float [H]).
// The case is kept padded to the longest sequence (core/problem.h, Layout). Every problem
// is one fc::Error line naming the file and the array.
#include <string>

#include "core/problem.h"

namespace fc {

AttentionInputs read_sdpa_report(const std::string& path);

}  // namespace fc

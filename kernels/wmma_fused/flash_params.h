#pragma once
// Everything one launch of the fused flash-attention kernel reads and writes, in one struct
// (a plain aggregate: it crosses to the device by value).
#include "kernels/common/device_mask.h"

namespace fc {

// Tile shape of the fused kernel: 128 query rows (8 warps x 16) against 64 keys per tile.
inline constexpr int kFlashRows = 128;
inline constexpr int kFlashKeys = 64;
inline constexpr int kFlashThreads = 256;
// The kernel's scores and maxima are in base 2; times ln 2 they are natural-log values.
inline constexpr double kFlashLogScale = 0.69314718055994530942;

struct FlashTrace {
  // Per (split, tile) slot s = split * tiles_per_split + tile: a dense block per slot.
  float* scores = nullptr;  // [slot][B,H,Sq,cols]  natural-log scores, -inf where masked
  float* p_tilde = nullptr; // [slot][B,H,Sq,cols]  exp(s - running max), before rounding for the MMA
  float* row_max = nullptr; // [slot][B,H,Sq]
  float* row_sum = nullptr; // [slot][B,H,Sq]
  float* acc = nullptr;     // [slot][B,H,Sq,D]    unnormalized output after the tile
  // A window of query rows (row_count 0: every row): a trace build writes only rows
  // [row_first, row_first + row_count) of each head, where Sq above and in the output and lse
  // is row_count; blocks of rows outside it do nothing.
  int row_first = 0, row_count = 0;
};

struct FlashParams {
  const void* q = nullptr;  // [B,H,Sq,D], or packed [rows,H,D] (varlen)
  const void* k = nullptr;  // [B,Hkv,Sk,D], packed [rows,Hkv,D] (varlen) or the paged cache [blocks,bs,Hkv,D]
  const void* v = nullptr;  // as k
  int batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0;  // query head h reads K/V head h / (H / Hkv)
  float scale_log2 = 0;     // softmax scale times log2(e): the kernel works in base 2
  // Softcap > 0: a score is softcap * tanh(q.k * softcap_scale) before the mask, softcap_scale
  // = scale / softcap; the base-2 kernels multiply by softcap_log2 = softcap * log2(e).
  float softcap = 0, softcap_scale = 0, softcap_log2 = 0;
  DeviceMask mask;
  bool has_mask = false;

  // Varlen (the packed layout, core/packed.h): sequence b's query rows from row q_offsets[b]
  // of q (cu_seqlens_q; the varlen-cu-seqlens fault passes cu_seqlens_k), its keys from row
  // cu_seqlens_k[b] of k and v; lengths from mask.q_lens and mask.kv_lens. Null: padded.
  const int* q_offsets = nullptr;
  const int* cu_seqlens_k = nullptr;
  // Paged KV: key j of sequence b in block block_table[b * block_table_stride + j / block
  // size] of the cache (max_blocks; another stride is the block-table-stride fault).
  const int* block_table = nullptr;
  int block_table_stride = 0, block_size_log2 = 0;

  void* out = nullptr;              // [B,H,Sq,D] in the input format (one split), rows past a sequence's length unwritten
  float* lse = nullptr;             // [B,H,Sq] each row's log-sum-exp (natural log, -inf for no key), or null
  float* partial_out = nullptr;     // [split][B,H,Sq,D], normalized within the split
  float* partial_lse = nullptr;     // [split][B,H,Sq], natural log, -inf for an empty split
  int splits = 1, tiles_per_split = 0;
  // Fault injection (splitk-partial-scale): partial outputs written without dividing by
  // their sum, while their lse still includes it. One uniform branch in the epilogue.
  bool partial_unnormalized = false;
  // Fault injection (production-epilogue-scale): the production instantiation's epilogue
  // multiplies its output by 1.5; the trace build ignores the switch. One uniform branch.
  bool production_scaled = false;

  FlashTrace trace;
};

}  // namespace fc

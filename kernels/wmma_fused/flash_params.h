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
};

struct FlashParams {
  const void* q = nullptr;  // [B,H,Sq,D]
  const void* k = nullptr;  // [B,H,Sk,D]
  const void* v = nullptr;  // [B,H,Sk,D]
  int batch = 0, heads = 0, q_len = 0, kv_len = 0;
  float scale_log2 = 0;     // softmax scale times log2(e): the kernel works in base 2
  DeviceMask mask;
  bool has_mask = false;

  void* out = nullptr;              // [B,H,Sq,D] in the input format (one split)
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

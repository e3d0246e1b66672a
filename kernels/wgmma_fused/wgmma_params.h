#pragma once
// What wgmma-fused's kernel takes beside the fused kernels' FlashParams: the TMA tensor maps
// of Q, K and V, its block size, and the pipeline faults it can be built with.
#include <cuda.h>

#include "kernels/wmma_fused/flash_params.h"

namespace fc {

// Consumer warpgroups a block, 64 query rows each, beside the producer warpgroup: three at
// D 64, two at D 128 (a consumer thread's accumulator is twice as large there, and three would
// leave it 160 registers). Against two at D 64: see kernels/wgmma_fused/wgmma_forward.cuh.
template <int D>
inline constexpr int kWgmmaConsumers = D == 64 ? 3 : 2;
template <int D>
inline constexpr int kWgmmaRows = 64 * kWgmmaConsumers<D>;  // a block's query rows
template <int D>
inline constexpr int kWgmmaThreads = 128 * (kWgmmaConsumers<D> + 1);
// A block's query rows at a head dim known at run time (64 or 128): the rows of Q's TMA box
// and of the stage graph's query tile.
inline int wgmma_rows(long long head_dim) { return head_dim == 64 ? kWgmmaRows<64> : kWgmmaRows<128>; }
// Keys a tile, at both head dims: the width of its blocked stage graph. Against tiles of 64
// (H100, 2026-11-27, bench in one run): 286.5 -> 346.5 TFLOP/s at B16 H16 S4096 D64, 492.9 ->
// 576.4 causal, 442.6 -> 532.6 at B4 H16 S4096 D128, 733.6 -> 894.0 causal. A third K/V slot
// changed nothing (346.3).
inline constexpr int kWgmmaKeys = 128;

// 3-D maps over [B*H(kv)][S][D] of each input, boxes of 64 columns (one 128-byte swizzled
// panel) by the rows of a block (Q) or a key tile (K, V).
struct WgmmaMaps {
  CUtensorMap q, k, v;
};

// Planted in the consumers' wait for a K tile (faults missing-mbarrier-wait and
// mbarrier-wrong-phase): no wait at all (a race), or a wait on the other phase's parity:
// before the slot's load lands that returns at once (a race), after it it waits for a phase
// that never comes (a deadlock, the usual outcome).
enum class PipelineFault { none, missing_wait, wrong_phase };

}  // namespace fc

#pragma once
// wgmma-fused's kernel: flash attention forward for sm_90a, with the Hopper data path.
//
// A block owns kWgmmaRows<D> query rows of one (batch, head) (192 at D 64, 128 at D 128) and
// a warpgroup more than it has consumers:
//   producer   one thread issues TMA loads: Q once, then each key tile's K and V into a ring
//              of kStages slots, each slot with a "full" mbarrier (the TMA bytes landed) and
//              an "empty" one (every consumer warp is done with it);
//   consumers  kWgmmaConsumers<D> warpgroups of 64 rows each: S = Q K^T by wgmma from shared
//              memory, the online softmax in registers, O += P V by wgmma with P from
//              registers. A warpgroup issues the last tile's P V with this tile's Q K^T, then
//              runs this tile's softmax; the warpgroups take the tensor cores in turn (named
//              barriers, round robin), so that one's GEMMs run while the others' softmax does
//              (FlashAttention-3's ping-pong).
// Three consumers at D 64 rather than two: with two, 41% of the cycles had no eligible warp
// (ncu, H100, 2026-11-27); a third warpgroup's softmax fills them, and each K and V tile
// loaded serves 192 rows instead of 128.
// Tiles of kWgmmaKeys (128) keys: S = Q K^T is one m64n128 GEMM a k16 step. The fragments of a
// wgmma accumulator are per warp those of mma.sync m16n8, so the masking, online softmax,
// trace writes and epilogue are wmma-fused's own functions (kernels/wmma_fused/
// flash_forward.cuh, for any tile width), and its trace build writes the same buffers, judged
// against the blocked reference with tiles of 128 keys.
//
//   kTrace  also write each tile's scores, p~, running max and sum and accumulator
//   kFault  a planted pipeline bug (PipelineFault), its own instantiation at D 64
#include "kernels/wgmma_fused/hopper_ops.cuh"
#include "kernels/wgmma_fused/wgmma_params.h"
#include "kernels/wmma_fused/flash_forward.cuh"

namespace fc {
namespace wgmma_detail {

inline constexpr int kStages = 2;
inline constexpr int kPanelColumns = 64;  // half-words in a 128-byte swizzled row

// Byte offsets in the block's shared memory (from a 1024-byte aligned base: the swizzle is
// a function of the address bits).
template <int D>
struct SharedLayout {
  static constexpr int kKeys = kWgmmaKeys;
  static constexpr int kPanels = D / kPanelColumns;
  static constexpr int kQPanel = kWgmmaRows<D> * kPanelColumns * 2;  // bytes of one Q panel
  static constexpr int kTilePanel = kKeys * kPanelColumns * 2;  // of one K or V panel
  static constexpr int kTileBytes = kPanels * kTilePanel;            // one K or V slot
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kPanels * kQPanel;
  static constexpr int kV = kK + kStages * kTileBytes;
  static constexpr int kBarriers = kV + kStages * kTileBytes;
  static constexpr int kBarrierCount = 1 + 4 * kStages;  // q_full, k_full, v_full, k_empty, v_empty
  static constexpr int kBytes = kBarriers + kBarrierCount * 8 + 1024;  // + the alignment slack
};

}  // namespace wgmma_detail

template <int D, class T, bool kTrace, PipelineFault kFault>
__global__ void __launch_bounds__(kWgmmaThreads<D>, 1) wgmma_forward_kernel(const FlashParams p,
                                                                            const __grid_constant__ WgmmaMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace flash_detail;
  using namespace hopper;
  using Layout = wgmma_detail::SharedLayout<D>;
  constexpr int kKeys = kWgmmaKeys, kRows = kWgmmaRows<D>, kGroups = kWgmmaConsumers<D>;
  constexpr int kStages = wgmma_detail::kStages, kPanel = wgmma_detail::kPanelColumns;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) &
                                                         ~static_cast<std::uintptr_t>(1023));
  T* sQ = reinterpret_cast<T*>(smem + Layout::kQ);
  T* sK = reinterpret_cast<T*>(smem + Layout::kK);
  T* sV = reinterpret_cast<T*>(smem + Layout::kV);
  std::uint64_t* q_full = reinterpret_cast<std::uint64_t*>(smem + Layout::kBarriers);
  std::uint64_t* k_full = q_full + 1;
  std::uint64_t* v_full = k_full + kStages;
  std::uint64_t* k_empty = v_full + kStages;
  std::uint64_t* v_empty = k_empty + kStages;
  constexpr int kConsumerWarps = 4 * kGroups;
  // Attended tile i's K and V sit in slot i % kStages of the ring, on that slot's use number
  // i / kStages: the parity of the phase its full barriers complete.
  const auto slot_of = [](int i) { return i % kStages; };
  const auto phase_of = [](int i) { return static_cast<std::uint32_t>(i / kStages) & 1; };

  // A head's blocks in reverse order: under a causal mask the last rows attend the most keys,
  // and the longest blocks first leave the shortest for the last wave.
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRows, bh = blockIdx.y;
  const int b = bh / p.heads, h = bh % p.heads;
  const int kv_head = h / (p.heads / p.kv_heads);  // GQA
  // This sequence's lengths (varlen: its own; its rows past q_len do not exist).
  const int q_len = p.mask.q_lens ? p.mask.q_lens[b] : p.q_len;
  const int kv_len = p.mask.kv_lens ? p.mask.kv_lens[b] : p.kv_len;
  if (q0 >= q_len) return;  // the whole block, before any barrier
  if constexpr (kTrace) {
    if (!block_traced<kRows>(p, q0)) return;  // outside the trace's window of rows
  }
  // Where a row's box starts: padded maps are [B*H][S][D], packed ones [rows][H][D] with the
  // sequence at its cu_seqlens offset (wgmma_launch.cpp).
  const bool packed = p.q_offsets != nullptr;
  const long long diagonal = mask_diagonal(p.mask, b);
  const int range_tiles = (kv_len + kKeys - 1) / kKeys;
  const KeySpan span = attended_keys<kRows>(p, b, q0, q_len, diagonal, 0, kv_len);
  const TileRange attended = tiles_holding<kKeys>(span, 0);
  const int first_tile = attended.first, end_tile = attended.end;

  if (threadIdx.x == 0) {
    barrier_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      barrier_init(&k_full[s], 1);
      barrier_init(&v_full[s], 1);
      barrier_init(&k_empty[s], kConsumerWarps);
      barrier_init(&v_empty[s], kConsumerWarps);
    }
    barrier_init_fence();
  }
  __syncthreads();

  // A consumer thread holds a tile's scores and the last p~ (96 registers with 128 keys) beside
  // the accumulator: more than an even share (168 of 384 threads; D 128 spilled there even with
  // 64 keys, two consumers), so the producer gives most of its own to the consumers: 232 each
  // of two, 160 each of three (the register file's 64K, less the producer's 32 a thread).
  constexpr int kProducerRegisters = kGroups == 2 ? 40 : 32, kConsumerRegisters = kGroups == 2 ? 232 : 160;
  static_assert(128 * (kProducerRegisters + kGroups * kConsumerRegisters) <= 65536, "over the register file");
  if (threadIdx.x < 128) {  // the producer warpgroup: one thread issues every load
    registers_decrease<kProducerRegisters>();
    if (threadIdx.x != 0) return;
    tma_prefetch_descriptor(&maps.q);
    tma_prefetch_descriptor(&maps.k);
    tma_prefetch_descriptor(&maps.v);
    barrier_arrive_expect(q_full, Layout::kPanels * Layout::kQPanel);
    for (int panel = 0; panel < Layout::kPanels; ++panel) {
      if (packed) tma_load_3d(sQ + panel * kRows * kPanel, &maps.q, panel * kPanel, h, p.q_offsets[b] + q0, q_full);
      else tma_load_3d(sQ + panel * kRows * kPanel, &maps.q, panel * kPanel, q0, bh, q_full);
    }
    // Keys [j0, j0 + kKeys) of K or V into a slot: one box a panel, padded or packed; from a
    // paged cache one a panel and block the tile spans (blocks of 8 keys or more: whole
    // swizzle groups). Keys past the sequence come from its last block: finite, and masked.
    const auto load_tile = [&](T* slot_base, const CUtensorMap* map, std::uint64_t* bar, int j0) {
      if (p.block_table) {
        const int block_keys = 1 << p.block_size_log2, rows = min(block_keys, kKeys);
        for (int r = 0; r < kKeys; r += rows) {
          const int j = min(j0 + r, kv_len - 1);
          const int block = p.block_table[static_cast<long long>(b) * p.block_table_stride + (j >> p.block_size_log2)];
          for (int panel = 0; panel < Layout::kPanels; ++panel) {
            tma_load_4d(slot_base + (panel * kKeys + r) * kPanel, map, panel * kPanel, kv_head,
                        (j0 + r) & (block_keys - 1), block, bar);
          }
        }
        return;
      }
      const int c1 = packed ? kv_head : j0, c2 = packed ? p.cu_seqlens_k[b] + j0 : b * p.kv_heads + kv_head;
      for (int panel = 0; panel < Layout::kPanels; ++panel) {
        tma_load_3d(slot_base + panel * kKeys * kPanel, map, panel * kPanel, c1, c2, bar);
      }
    };
    for (int tile = first_tile; tile < end_tile; ++tile) {
      const int i = tile - first_tile, slot = slot_of(i), j0 = tile * kKeys;
      const std::uint32_t phase = phase_of(i);
      barrier_wait(&k_empty[slot], phase ^ 1);
      if constexpr (kFault != PipelineFault::none) {
        // The faulty consumers free a K slot before its load has landed. Arming the slot's
        // next phase while this one still counts bytes would break the barrier (the device
        // traps); the producer waits for it, so that the bug stays a race on the data.
        if (i >= kStages) barrier_wait(&k_full[slot], phase ^ 1);
      }
      barrier_arrive_expect(&k_full[slot], Layout::kTileBytes);
      load_tile(sK + slot * Layout::kPanels * kKeys * kPanel, &maps.k, &k_full[slot], j0);
      barrier_wait(&v_empty[slot], phase ^ 1);
      barrier_arrive_expect(&v_full[slot], Layout::kTileBytes);
      load_tile(sV + slot * Layout::kPanels * kKeys * kPanel, &maps.v, &v_full[slot], j0);
    }
    if constexpr (kFault != PipelineFault::none) {
      // The consumers may never wait for the last K loads: none may still be writing when
      // the block exits.
      for (int tile = max(first_tile, end_tile - kStages); tile < end_tile; ++tile) {
        const int i = tile - first_tile;
        barrier_wait(&k_full[slot_of(i)], phase_of(i));
      }
    }
    return;
  }

  registers_increase<kConsumerRegisters>();
  const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The consumer warpgroup: rows [64 group, 64 group + 64) of the block. Broadcast, so that the
  // compiler knows it uniform: wgmma issued under a branch it cannot prove uniform is serialized.
  const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
  const int row_of[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.0f, 0.0f};  // base 2
  const size_t rows_total = static_cast<size_t>(p.batch) * p.heads * (kTrace ? traced_rows(p) : p.q_len);
  auto tile_trace = [&](int tile) {  // the stage's columns (padded) and this sequence's
    const int j0 = tile * kKeys, pitch = min(kKeys, p.kv_len - j0), cols = min(kKeys, kv_len - j0);
    return TileTrace<D, kKeys>{p, static_cast<size_t>(tile), rows_total, bh, t, pitch, cols, {row_of[0], row_of[1]}};
  };
  // A tile every key of which is masked for the thread's rows (for the block's, or for its
  // warpgroup's, passed over): the state unchanged.
  auto trace_skipped = [&](int tile) {
    if constexpr (kTrace) {
      const float none[kKeys / 8][4] = {};
      const TileTrace<D, kKeys> trace = tile_trace(tile);
      trace.scores(none, false);
      trace.p_tilde(none, false);
      trace.state(row_max, row_sum, o);
    }
  };
  const T* q_rows = sQ + group * 64 * kPanel;  // this warpgroup's 64 rows of panel 0
  // The operands' matrix descriptors at their first k16 step and slot; another step or slot is
  // a constant added to the address field (16-byte units; a shared address is below 2^18, so
  // nothing carries out of the field's 14 bits). Formed once, not at every wgmma: they were
  // ~10% of the instructions at D 64 (uniform-datapath address arithmetic); 356.9 -> 373.6
  // TFLOP/s at B16 H16 S4096 D64 (H100, one bench run, 2026-11-27).
  const std::uint64_t q_desc = matrix_descriptor(q_rows, 16, 1024);
  const std::uint64_t k_desc = matrix_descriptor(sK, 16, 1024);
  const std::uint64_t v_desc = matrix_descriptor(sV, Layout::kTilePanel, 1024);
  const auto advanced = [](std::uint64_t desc, int bytes) { return desc + static_cast<std::uint64_t>(bytes >> 4); };
  float s[kKeys / 8][4];
  unsigned a[kKeys / 16][4];  // the last softmax's p~, as A fragments

  // The consumer warpgroups take the tensor cores in turn: warpgroup g at named barrier 1 + g,
  // which the one before it (the last, before warpgroup 0) arrives at when it passes them on.
  // One issues its GEMMs while the others run their softmax.
  auto take_turn = [&] { named_barrier_sync(1 + group, 256); };
  auto pass_turn = [&] { named_barrier_arrive(1 + (group + 1) % kGroups, 256); };
  // Attended tile i's K slot waited for, S = Q K^T issued into s: D / 16 steps of k16, each
  // within one panel at 32 bytes a step.
  auto issue_scores = [&](int i) {
    const int slot = slot_of(i);
    const std::uint32_t phase = phase_of(i);
    if constexpr (kFault == PipelineFault::wrong_phase) {
      barrier_wait(&k_full[slot], phase ^ 1);
    } else if constexpr (kFault != PipelineFault::missing_wait) {
      barrier_wait(&k_full[slot], phase);
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int panel = kk / 4, step_bytes = (kk % 4) * 32;
      wgmma_ss<T, kKeys>(s, advanced(q_desc, panel * Layout::kQPanel + step_bytes),
                         advanced(k_desc, slot * Layout::kTileBytes + panel * Layout::kTilePanel + step_bytes), kk > 0);
    }
  };
  // O += P V of attended tile i: V N-major, 16 keys (2048 bytes) a step, its D / 64 panels
  // a tile's keys apart.
  auto issue_values = [&](int i) {
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      wgmma_rs<T, D>(o, a[kk], advanced(v_desc, slot_of(i) * Layout::kTileBytes + kk * 16 * kPanel * 2));
    }
  };
  auto before_issue = [&] {
    fence_registers(o);
    fence_registers(s);
    wgmma_fence();
  };
  auto after_wait = [&] {
    fence_registers(o);
    fence_registers(s);
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {  // the A registers are read until the wait
#pragma unroll
      for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[kk][e])::"memory");
    }
  };
  auto release = [&](std::uint64_t* empty) {
    if (lane == 0) barrier_arrive(empty);
  };
  auto softmax = [&](int tile) {
    scale_and_mask<64>(s, p, b, h, row_of, q0 + 64 * group, q_len, diagonal, tile * kKeys, kv_len, t);
    if constexpr (kTrace) tile_trace(tile).scores(s, true);
    online_softmax_tile<D>(s, row_max, row_sum, o);
    if constexpr (kTrace) tile_trace(tile).p_tilde(s, true);
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) p_fragment<T>(s, kk, a[kk]);
  };
  // The accumulator after tile `tile`'s P V, with the running max and sum of its softmax.
  auto trace_state = [&](int tile) {
    if constexpr (kTrace) tile_trace(tile).state(row_max, row_sum, o);
  };

  barrier_wait(q_full, 0);
  for (int tile = 0; tile < min(first_tile, range_tiles); ++tile) trace_skipped(tile);
  if (first_tile < end_tile) {
    const int tiles = end_tile - first_tile;
    // The tiles this warpgroup's own 64 rows attend, [lead, lead + mine) of the block's: the
    // others (the last ones of a causal block, for its first rows) are passed over, their GEMMs
    // and softmax not issued, though the warpgroup still takes a turn for each and releases
    // their slots once loaded, in order.
    // (A warpgroup whose rows are all past the sequence attends nothing.)
    const KeySpan own = attended_keys<64>(p, b, q0 + 64 * group, q_len, diagonal, 0, kv_len);
    const bool attends = q0 + 64 * group < q_len && own.end > own.begin;
    const TileRange own_tiles = attends ? tiles_holding<kKeys>(own, 0) : TileRange{end_tile, end_tile};
    const int lead = min(max(own_tiles.first - first_tile, 0), tiles);
    const int mine = max(min(own_tiles.end - first_tile, tiles) - lead, 0);
    // Every warpgroup takes tiles + 1 turns and passes each on, but for the last warpgroup's
    // last: warpgroup 0 takes no more.
    int turns = tiles + 1;
    const auto take = [&] {
      take_turn();
      --turns;
    };
    const auto pass = [&] {
      if (turns > 0 || group != kGroups - 1) pass_turn();
    };
    const auto pass_over = [&](int i) {
      barrier_wait(&k_full[slot_of(i)], phase_of(i));  // before the turn: the others' GEMMs go on
      barrier_wait(&v_full[slot_of(i)], phase_of(i));
      take();
      pass();
      release(&k_empty[slot_of(i)]);
      release(&v_empty[slot_of(i)]);
      trace_skipped(first_tile + i);
    };
    if (group == kGroups - 1) pass_turn();  // warpgroup 0 goes first
    for (int i = 0; i < lead; ++i) pass_over(i);
    if (mine > 0) {
      const int last = lead + mine - 1;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      // The first tile's Q K^T alone; then each pass the last tile's P V with this tile's
      // Q K^T; then the last P V alone.
      take();
      before_issue();
      issue_scores(lead);
      wgmma_commit();
      pass();
      wgmma_wait<0>();
      after_wait();
      release(&k_empty[slot_of(lead)]);
      softmax(first_tile + lead);
      for (int i = lead + 1; i <= last; ++i) {
        take();
        barrier_wait(&v_full[slot_of(i - 1)], phase_of(i - 1));
        before_issue();
        issue_values(i - 1);
        issue_scores(i);
        wgmma_commit();
        pass();
        wgmma_wait<0>();
        after_wait();
        release(&v_empty[slot_of(i - 1)]);
        release(&k_empty[slot_of(i)]);
        trace_state(first_tile + i - 1);
        softmax(first_tile + i);
      }
      take();
      barrier_wait(&v_full[slot_of(last)], phase_of(last));
      before_issue();
      issue_values(last);
      wgmma_commit();
      pass();
      wgmma_wait<0>();
      after_wait();
      release(&v_empty[slot_of(last)]);
      trace_state(first_tile + last);
    } else {
      take();  // the turn of the last P V
      pass();
    }
    for (int i = lead + mine; i < tiles; ++i) pass_over(i);
  }
  for (int tile = max(end_tile, first_tile); tile < range_tiles; ++tile) trace_skipped(tile);

  store_rows<D, T, kTrace, false>(p, o, row_max, row_sum, row_of, q_len, bh, 0, rows_total, t);
#else
  __trap();  // built without sm_90a: the host never launches it (wgmma_unsupported)
#endif
}

}  // namespace fc

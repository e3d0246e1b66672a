#pragma once
// Fused flash-attention forward on tensor cores (mma.sync m16n8k16, fp16/bf16 in, fp32
// accumulate), online softmax in base 2 with the scale folded into one multiply.
//
// A block owns 128 query rows of one (batch, head) and one split of the keys; each of its 8
// warps owns 16 rows. Per key tile of 64: S = Q K^T from shared memory, softcap, mask, running
// max and sum, P = exp2(S - max) kept in registers and fed back as the A operand of O += P V.
// K and V tiles are double-buffered with cp.async. Causality, key padding and a sliding
// window cut the key loop short for the whole block, at both ends.
//
// What a feature costs when it is off: GQA, varlen and the window are offsets and loop
// bounds taken once per block; the softcap and the per-element mask are one uniform branch a
// tile around the element loop; the paged KV cache is a compile-time variant. The mask is
// the structural range of keys each row attends (causality, padding, window: a few integer
// operations) and the dense mask; ALiBi is left to the unfused implementations.
//
//   kTrace        also write, per tile, the scores, p~, running max and sum, and the
//                 accumulator, so the harness checks them stage by stage (off: no cost)
//   kSplit        write the split's normalized partial output and lse (split-KV) instead
//                 of the final output
//   kMissingSync  fault injection: drop the barrier between the tile copy and its use
//   kPaged        read K and V from the paged cache through the block table
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/wmma_fused/flash_params.h"
#include "kernels/wmma_fused/mma_tile_ops.cuh"

namespace fc {

namespace flash_detail {
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kNegInf = -__builtin_huge_valf();
constexpr int kWarps = kFlashThreads / 32;

// Where row j of a [n][D] matrix lies: base + j * stride elements, or with kPaged at row
// (table[j / block size] * block size + j % block size) of the cache.
template <class T>
struct RowSource {
  const T* base;
  long long stride;
  const int* table;  // kPaged only
  int block_log2;
};

template <bool kPaged, class T>
__device__ __forceinline__ const T* row_address(const RowSource<T>& src, int j) {
  if constexpr (kPaged) {
    const long long block = src.table[j >> src.block_log2];
    return src.base + ((block << src.block_log2) + (j & ((1 << src.block_log2) - 1))) * src.stride;
  } else {
    return src.base + j * src.stride;
  }
}

// Copies rows [row0, row0 + rows) of a [n][D] global matrix into a swizzled shared tile,
// zero-filling rows at or past n.
template <int D, bool kPaged = false, class T>
__device__ __forceinline__ void load_tile_async(T* tile, const RowSource<T>& src, int row0, int rows, int n) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < rows * kChunks; i += kFlashThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < n;
    const T* from = valid ? row_address<kPaged>(src, row0 + r) + c * 8 : src.base;
    mma::copy16_async(tile + mma::swizzled<D>(r, c), from, valid);
  }
}

// The keys [begin, end) of a split that some row of the block's kRows from q0 attends
// (causality, padding, the window); begin >= end when none.
struct KeySpan {
  int begin, end;
};
template <int kRows = kFlashRows>
__device__ __forceinline__ KeySpan attended_keys(const FlashParams& p, int b, int q0, int q_len, long long diagonal,
                                                 int range_begin, int range_end) {
  const int last_row = min(q0 + kRows, q_len) - 1;
  long long begin = range_begin, end = range_end;
  if (p.mask.causal == 1) end = min(end, static_cast<long long>(last_row) + 1);
  if (p.mask.causal == 2) end = min(end, last_row + 1 + diagonal);
  if (p.mask.key_lengths) end = min(end, static_cast<long long>(p.mask.key_lengths[b]));
  if (p.mask.window_right >= 0) end = min(end, last_row + diagonal + p.mask.window_right + 1);
  if (p.mask.window_left >= 0) begin = max(begin, q0 + diagonal - p.mask.window_left);
  return {static_cast<int>(begin), static_cast<int>(max(begin, end))};
}

// The tiles of kKeys keys, counted from range_begin, that hold a span's keys: [first, end);
// none (0, 0) for an empty span.
struct TileRange {
  int first, end;
};
template <int kKeys>
__device__ __forceinline__ TileRange tiles_holding(KeySpan span, int range_begin) {
  if (span.end <= span.begin) return {0, 0};
  return {span.begin > range_begin ? (span.begin - range_begin) / kKeys : 0,
          (span.end - range_begin + kKeys - 1) / kKeys};
}

// Does any element of the tile of kKeys keys from j0 need the per-element mask, for the kRows
// rows from q0?
template <int kKeys, int kRows>
__device__ __forceinline__ bool tile_needs_mask(const FlashParams& p, int q0, int q_len, long long diagonal, int j0) {
  if (p.mask.dense || p.mask.key_lengths) return true;
  const int last_key = j0 + kKeys - 1, last_row = min(q0 + kRows, q_len) - 1;
  if (p.mask.causal == 1 && last_key > q0) return true;
  if (p.mask.causal == 2 && last_key > q0 + diagonal) return true;
  if (p.mask.window_right >= 0 && last_key > q0 + diagonal + p.mask.window_right) return true;
  return p.mask.window_left >= 0 && j0 < last_row + diagonal - p.mask.window_left;
}

// The keys row `row` attends among [0, range_end): causality, key padding and the window as
// one range [first, last] (the structural part of the mask, a few integer operations).
__device__ __forceinline__ void attended_range(const FlashParams& p, int b, int row, int diagonal, int range_end,
                                               int& first, int& last) {
  first = 0;
  last = range_end - 1;
  if (p.mask.causal == 1) last = min(last, row);
  if (p.mask.causal == 2) last = min(last, row + diagonal);
  if (p.mask.key_lengths) last = min(last, p.mask.key_lengths[b] - 1);
  if (p.mask.window_right >= 0) last = min(last, row + diagonal + p.mask.window_right);
  if (p.mask.window_left >= 0) first = row + diagonal - p.mask.window_left;
}

// The dense mask's term of one score (-inf where a boolean mask masks it).
__device__ __forceinline__ float dense_bias(const DeviceMask& m, int b, int h, int row, int col) {
  const long long at = b * m.dense_batch_stride + h * m.dense_head_stride + row * m.dense_row_stride + col;
  if (m.dense_is_bias) return static_cast<const float*>(m.dense)[at];
  return static_cast<const unsigned char*>(m.dense)[at] ? 0.0f : kNegInf;
}

// The rows of each head a trace build writes (FlashTrace's window), and whether `row` is one.
__device__ __forceinline__ int traced_rows(const FlashParams& p) {
  return p.trace.row_count > 0 ? p.trace.row_count : p.q_len;
}
__device__ __forceinline__ bool traced_row(const FlashParams& p, int row) {
  return p.trace.row_count == 0 || (row >= p.trace.row_first && row < p.trace.row_first + p.trace.row_count);
}
// Whether any of the block's rows [q0, q0 + kRows) is in the window.
template <int kRows = kFlashRows>
__device__ __forceinline__ bool block_traced(const FlashParams& p, int q0) {
  return p.trace.row_count == 0 || (q0 + kRows > p.trace.row_first && q0 < p.trace.row_first + p.trace.row_count);
}

// Writes what one block holds after one tile of kKeys keys into the trace buffers (kTrace
// builds only).
template <int D, int kKeys = kFlashKeys>
struct TileTrace {
  const FlashParams& p;
  size_t slot, rows_total;
  int bh, t;
  int pitch;  // the tile's columns in the stage's [B,H,Sq,cols] layout
  int cols;   // of them, those of this sequence's keys (varlen: fewer)
  int rows[2];

  __device__ size_t row_index(int r) const {
    return static_cast<size_t>(bh) * traced_rows(p) + (rows[r] - p.trace.row_first);
  }
  __device__ bool written(int r) const { return rows[r] < p.q_len && traced_row(p, rows[r]); }

  // Scores as the kernel holds them, in base 2 (the stage declares the ln 2 that converts
  // them on the host), or -inf for a tile skipped as masked.
  __device__ void scores(const float (&s)[kKeys / 8][4], bool computed) const {
    write_tile(p.trace.scores, s, kNegInf, computed);
  }
  // p~ before rounding to the MMA operand format, or 0 for a skipped tile.
  __device__ void p_tilde(const float (&s)[kKeys / 8][4], bool computed) const {
    write_tile(p.trace.p_tilde, s, 0.0f, computed);
  }
  __device__ void state(const float (&row_max)[2], const float (&row_sum)[2], const float (&o)[D / 8][4]) const {
    for (int r = 0; r < 2; ++r) {
      if (!written(r)) continue;
      if (t == 0) {
        p.trace.row_max[slot * rows_total + row_index(r)] = row_max[r];  // base 2, as held
        p.trace.row_sum[slot * rows_total + row_index(r)] = row_sum[r];
      }
      float* acc = p.trace.acc + (slot * rows_total + row_index(r)) * D;
      for (int nt = 0; nt < D / 8; ++nt) {
        acc[nt * 8 + 2 * t] = o[nt][2 * r];
        acc[nt * 8 + 2 * t + 1] = o[nt][2 * r + 1];
      }
    }
  }

 private:
  __device__ void write_tile(float* base, const float (&s)[kKeys / 8][4], float fill, bool computed) const {
    for (int r = 0; r < 2; ++r) {
      if (!written(r)) continue;
      float* out = base + slot * rows_total * kKeys + row_index(r) * pitch;
      for (int nt = 0; nt < kKeys / 8; ++nt)
        for (int e = 0; e < 2; ++e) {
          const int c = nt * 8 + 2 * t + e;
          if (c < cols) out[c] = computed ? s[nt][2 * r + e] : fill;
        }
    }
  }
};

// Scales one tile of scores into base 2 (soft-capped when asked) and masks it, for the thread's
// rows row_of[0] and row_of[1] (t: its lane in the quad that shares them), among the kRows
// rows from q0 that decide together whether the tile needs the per-element mask; the tile is
// kN fragments of 8 keys.
template <int kRows = kFlashRows, int kN>
__device__ __forceinline__ void scale_and_mask(float (&s)[kN][4], const FlashParams& p, int b, int h,
                                               const int (&row_of)[2], int q0, int q_len, long long diagonal,
                                               int j0, int range_end, int t) {
  if (p.softcap > 0.0f) {
#pragma unroll
    for (int nt = 0; nt < kN; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = p.softcap_log2 * tanhf(s[nt][e] * p.softcap_scale);
  } else {
#pragma unroll
    for (int nt = 0; nt < kN; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] *= p.scale_log2;
  }
  if (p.has_mask && tile_needs_mask<kN * 8, kRows>(p, q0, q_len, diagonal, j0)) {
    // The keys each of the thread's two rows attends, [first, last], and the dense mask.
    int first[2], last[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      attended_range(p, b, row_of[r], static_cast<int>(diagonal), range_end, first[r], last[r]);
      // A row past the sequence's last has no mask row to read (the dense mask would be read
      // out of bounds: an illegal address at long keys on the H100).
      if (row_of[r] >= q_len) first[r] = range_end;
    }
    const bool biased = p.mask.dense != nullptr;
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = j0 + nt * 8 + 2 * t + (e & 1), r = e >> 1;
        if (col < first[r] || col > last[r]) {
          s[nt][e] = kNegInf;
        } else if (biased) {
          s[nt][e] += dense_bias(p.mask, b, h, row_of[r], col) * kLog2e;
        }
      }
      // The dense mask's loads a fragment at a time: hoisted all together (as the compiler
      // does), their registers beside the scores and the accumulator spilled wgmma-fused's
      // consumers at 160 registers (ptxas, sm_90a: 204 bytes; none with this).
      asm volatile("" ::: "memory");
    }
  } else if (j0 + kN * 8 > range_end) {  // only the tile that holds the range's end masks keys
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (j0 + nt * 8 + 2 * t + (e & 1) >= range_end) s[nt][e] = kNegInf;
      }
    }
  }
}

// 2^x by the MUFU unit alone, a result below 2^-126 flushed to zero. exp2f adds a range test
// and two multiplies an element to keep subnormal results, which the error model does not
// count on (reference/stage_math.h kAccEta: 2^-126 absolute). At D 64 they were a fifth of
// wgmma-fused's instructions (ncu, H100, 2026-11-27); without them, in one bench run,
// wgmma-fused 344.6 -> 356.9 TFLOP/s at B16 H16 S4096 D64, wmma-fused 206.8 -> 221.4.
__device__ __forceinline__ float exp2_flushed(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One tile of the online softmax of the thread's two rows: the running max and sum updated,
// s turned into p~ = exp2(s - max), the accumulator o rescaled.
template <int D, int kN>
__device__ __forceinline__ void online_softmax_tile(float (&s)[kN][4], float (&row_max)[2],
                                                    float (&row_sum)[2], float (&o)[D / 8][4]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float top = kNegInf;
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) top = fmaxf(top, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
    const float m_new = fmaxf(row_max[r], mma::quad_max(top));
    // A row with no key yet keeps max -inf; subtracting 0 instead makes its p~ exactly 0.
    const float m_use = m_new == kNegInf ? 0.0f : m_new;
    const float rescale = exp2_flushed(row_max[r] - m_use);
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kN; ++nt) {
      s[nt][2 * r] = exp2_flushed(s[nt][2 * r] - m_use);
      s[nt][2 * r + 1] = exp2_flushed(s[nt][2 * r + 1] - m_use);
      sum += s[nt][2 * r] + s[nt][2 * r + 1];
    }
    // Explicit FMAs here and in the lse: the trace and production builds are compiled apart,
    // and must agree bit for bit (a contraction the compiler may choose differs in the last bit).
    row_sum[r] = __fmaf_rn(row_sum[r], rescale, mma::quad_sum(sum));
    row_max[r] = m_new;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][2 * r] *= rescale;
      o[nt][2 * r + 1] *= rescale;
    }
  }
}

// Normalizes and stores the thread's two rows: the final output (and lse), or this split's
// partial output and lse.
template <int D, class T, bool kTrace, bool kSplit>
__device__ __forceinline__ void store_rows(const FlashParams& p, const float (&o)[D / 8][4], const float (&row_max)[2],
                                           const float (&row_sum)[2], const int (&row_of)[2], int q_len, int bh,
                                           int split, size_t rows_total, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_of[r];
    if (row >= q_len) continue;
    float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
    if constexpr (kSplit) {
      if (p.partial_unnormalized) inv = 1.0f;
    }
    if constexpr (!kTrace) {
      if (p.production_scaled) inv *= 1.5f;
    }
    size_t row_index = static_cast<size_t>(bh) * p.q_len + row;
    if constexpr (kTrace) {  // a window's rows, at their place in it
      if (!traced_row(p, row)) continue;
      row_index = static_cast<size_t>(bh) * traced_rows(p) + (row - p.trace.row_first);
    }
    const float lse = row_sum[r] > 0.0f ? __fmaf_rn(row_max[r], kLn2, logf(row_sum[r])) : kNegInf;
    if constexpr (kSplit) {
      float* out = p.partial_out + (static_cast<size_t>(split) * rows_total + row_index) * D;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        *reinterpret_cast<float2*>(out + nt * 8 + 2 * t) = make_float2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
      }
      if (t == 0) p.partial_lse[split * rows_total + row_index] = lse;
    } else {
      T* out = static_cast<T*>(p.out) + row_index * D;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        *reinterpret_cast<unsigned*>(out + nt * 8 + 2 * t) = mma::pack2<T>(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
      }
      if (p.lse && t == 0) p.lse[row_index] = lse;
    }
  }
}

// p~ of the thread's two rows for keys [16 kk, 16 kk + 16), rounded to T, as the A fragment of
// an m16n8k16 MMA (the same per warp for wgmma's m64nNk16 from registers).
template <class T, int kN>
__device__ __forceinline__ void p_fragment(const float (&s)[kN][4], int kk, unsigned (&a)[4]) {
  a[0] = mma::pack2<T>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = mma::pack2<T>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = mma::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = mma::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}
}  // namespace flash_detail

template <int D, class T, bool kTrace, bool kSplit, bool kMissingSync, bool kPaged>
// Two blocks per SM up to D = 64 (128 registers a thread); one above.
__global__ void __launch_bounds__(kFlashThreads, D <= 64 ? 2 : 1) flash_forward_kernel(const FlashParams p) {
  using namespace flash_detail;
  // Q's fragments stay in registers up to D = 128; at D = 256 they would leave too few for
  // the accumulator, and are read from shared memory at each use instead.
  constexpr bool kQInRegisters = D <= 128;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + kFlashRows * D;       // two buffers of [kFlashKeys][D]
  T* sV = sK + 2 * kFlashKeys * D;   // two buffers of [kFlashKeys][D]

  const int q0 = blockIdx.x * kFlashRows, bh = blockIdx.y, split = blockIdx.z;
  const int b = bh / p.heads, h = bh % p.heads;
  const int kv_head = h / (p.heads / p.kv_heads);  // GQA
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // This sequence's lengths (varlen: its own; rows past q_len do not exist).
  const int q_len = p.mask.q_lens ? p.mask.q_lens[b] : p.q_len;
  const int kv_len = p.mask.kv_lens ? p.mask.kv_lens[b] : p.kv_len;
  if (q0 >= q_len) return;
  if constexpr (kTrace) {
    if (!block_traced(p, q0)) return;
  }
  const long long diagonal = mask_diagonal(p.mask, b);

  // Q, K and V rows: padded [B,H(kv),S,D], packed [rows,H(kv),D] at the sequence's offsets,
  // or K and V from the paged cache.
  const T* q_base = static_cast<const T*>(p.q);
  const T* k_base = static_cast<const T*>(p.k);
  const T* v_base = static_cast<const T*>(p.v);
  RowSource<T> q_rows, k_rows, v_rows;
  if (p.q_offsets) {
    q_rows = {q_base + (static_cast<long long>(p.q_offsets[b]) * p.heads + h) * D, static_cast<long long>(p.heads) * D,
              nullptr, 0};
  } else {
    q_rows = {q_base + static_cast<long long>(bh) * p.q_len * D, D, nullptr, 0};
  }
  if constexpr (kPaged) {
    k_rows = {k_base + kv_head * D, static_cast<long long>(p.kv_heads) * D,
              p.block_table + static_cast<long long>(b) * p.block_table_stride, p.block_size_log2};
    v_rows = {v_base + kv_head * D, k_rows.stride, k_rows.table, p.block_size_log2};
  } else if (p.cu_seqlens_k) {
    const long long kv_stride = static_cast<long long>(p.kv_heads) * D;
    const long long first = static_cast<long long>(p.cu_seqlens_k[b]) * kv_stride + kv_head * D;
    k_rows = {k_base + first, kv_stride, nullptr, 0};
    v_rows = {v_base + first, kv_stride, nullptr, 0};
  } else {
    const long long first = (static_cast<long long>(b) * p.kv_heads + kv_head) * p.kv_len * D;
    k_rows = {k_base + first, D, nullptr, 0};
    v_rows = {v_base + first, D, nullptr, 0};
  }

  // This split's keys, in whole tiles of the padded key range (the stage graph's), up to the
  // sequence's last key; the attended part of them for this block.
  const int range_begin = min(p.kv_len, split * p.tiles_per_split * kFlashKeys);
  const int padded_end = min(p.kv_len, (split + 1) * p.tiles_per_split * kFlashKeys);
  const int range_end = min(padded_end, kv_len);
  const int range_tiles = range_end > range_begin ? (range_end - range_begin + kFlashKeys - 1) / kFlashKeys : 0;
  const KeySpan span = attended_keys(p, b, q0, q_len, diagonal, range_begin, range_end);
  const TileRange attended = tiles_holding<kFlashKeys>(span, range_begin);
  const int first_tile = attended.first, end_tile = attended.end;

  load_tile_async<D>(sQ, q_rows, q0, kFlashRows, q_len);
  mma::commit_async();
  if (first_tile < end_tile) {
    load_tile_async<D, kPaged>(sK, k_rows, range_begin + first_tile * kFlashKeys, kFlashKeys, kv_len);
    load_tile_async<D, kPaged>(sV, v_rows, range_begin + first_tile * kFlashKeys, kFlashKeys, kv_len);
  }
  mma::commit_async();
  mma::wait_async<1>();
  __syncthreads();

  unsigned qf[kQInRegisters ? D / 16 : 1][4];  // this warp's 16 rows of Q as A fragments
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      mma::ldmatrix_x4(qf[kk], sQ + mma::swizzled<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.0f, 0.0f};  // rows g and g + 8, base 2
  const int row_of[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

  const size_t rows_total = static_cast<size_t>(p.batch) * p.heads * (kTrace ? traced_rows(p) : p.q_len);
  auto tile_trace = [&](int tile, int j0) {
    return TileTrace<D>{p, static_cast<size_t>(split) * p.tiles_per_split + tile, rows_total, bh, t,
                        min(kFlashKeys, padded_end - j0), min(kFlashKeys, range_end - j0), {row_of[0], row_of[1]}};
  };

  for (int tile = 0; tile < range_tiles; ++tile) {
    const int j0 = range_begin + tile * kFlashKeys;
    if (tile < first_tile || tile >= end_tile) {  // every key masked for every row of the block: state unchanged
      if constexpr (kTrace) {
        const float none[kFlashKeys / 8][4] = {};
        const TileTrace<D> trace = tile_trace(tile, j0);
        trace.scores(none, false);
        trace.p_tilde(none, false);
        trace.state(row_max, row_sum, o);
      }
      continue;
    }
    const int buffer = (tile - first_tile) & 1;
    const T* kt = sK + buffer * kFlashKeys * D;
    const T* vt = sV + buffer * kFlashKeys * D;
    mma::wait_async<0>();
    if constexpr (!kMissingSync) __syncthreads();
    if (tile + 1 < end_tile) {  // prefetch the next tile into the other buffer
      load_tile_async<D, kPaged>(sK + (buffer ^ 1) * kFlashKeys * D, k_rows, j0 + kFlashKeys, kFlashKeys, kv_len);
      load_tile_async<D, kPaged>(sV + (buffer ^ 1) * kFlashKeys * D, v_rows, j0 + kFlashKeys, kFlashKeys, kv_len);
    }
    mma::commit_async();

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    float s[kFlashKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kFlashKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned a[4];
      if constexpr (kQInRegisters) {
        a[0] = qf[kk][0], a[1] = qf[kk][1], a[2] = qf[kk][2], a[3] = qf[kk][3];
      } else {
        mma::ldmatrix_x4(a, sQ + mma::swizzled<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
      }
#pragma unroll
      for (int np = 0; np < kFlashKeys / 16; ++np) {
        unsigned bf[4];
        const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
        mma::ldmatrix_x4(bf, kt + mma::swizzled<D>(key, 2 * kk + ((lane >> 3) & 1)));
        mma::mma_16816<T>(s[2 * np], a, bf[0], bf[1]);
        mma::mma_16816<T>(s[2 * np + 1], a, bf[2], bf[3]);
      }
    }

    scale_and_mask(s, p, b, h, row_of, q0, q_len, diagonal, j0, range_end, t);
    if constexpr (kTrace) tile_trace(tile, j0).scores(s, true);
    online_softmax_tile<D>(s, row_max, row_sum, o);

    // O += P V, P straight from the S registers as A fragments.
#pragma unroll
    for (int kk = 0; kk < kFlashKeys / 16; ++kk) {
      unsigned a[4];
      p_fragment<T>(s, kk, a);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        unsigned bf[4];
        const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        mma::ldmatrix_x4_trans(bf, vt + mma::swizzled<D>(key, 2 * dp + (lane >> 4)));
        mma::mma_16816<T>(o[2 * dp], a, bf[0], bf[1]);
        mma::mma_16816<T>(o[2 * dp + 1], a, bf[2], bf[3]);
      }
    }
    if constexpr (kTrace) {
      const TileTrace<D> trace = tile_trace(tile, j0);
      trace.p_tilde(s, true);
      trace.state(row_max, row_sum, o);
    }
  }

  store_rows<D, T, kTrace, kSplit>(p, o, row_max, row_sum, row_of, q_len, bh, split, rows_total, t);
}

}  // namespace fc

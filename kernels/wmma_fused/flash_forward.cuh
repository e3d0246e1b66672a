#pragma once
// Fused flash-attention forward on tensor cores (mma.sync m16n8k16, fp16/bf16 in, fp32
// accumulate), online softmax in base 2 with the scale folded into one multiply.
//
// A block owns 128 query rows of one (batch, head) and one split of the keys; each of its 8
// warps owns 16 rows. Per key tile of 64: S = Q K^T from shared memory, mask, running max
// and sum, P = exp2(S - max) kept in registers and fed back as the A operand of O += P V.
// K and V tiles are double-buffered with cp.async. Causality and key padding cut the key
// loop short for the whole block.
//
//   kTrace        also write, per tile, the scores, p~, running max and sum, and the
//                 accumulator, so the harness checks them stage by stage (off: no cost)
//   kSplit        write the split's normalized partial output and lse (split-KV) instead
//                 of the final output
//   kMissingSync  fault injection: drop the barrier between the tile copy and its use
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

// Copies rows [row0, row0 + rows) of a [n][D] global matrix into a swizzled shared tile,
// zero-filling rows at or past n.
template <int D, class T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* global, int row0, int rows, int n) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < rows * kChunks; i += kFlashThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < n;
    const T* src = global + (valid ? static_cast<size_t>(row0 + r) * D + c * 8 : 0);
    mma::copy16_async(tile + mma::swizzled(r, c, D), src, valid);
  }
}

// Keys past this one are masked for every row of the block (causality, padding).
__device__ __forceinline__ int attended_key_end(const FlashParams& p, int b, int q0, int range_end) {
  int end = range_end;
  const int last_row = min(q0 + kFlashRows, p.q_len) - 1;
  if (p.mask.causal == 1) end = min(end, last_row + 1);
  if (p.mask.causal == 2) end = min(end, static_cast<int>(last_row + 1 + p.mask.causal_offset));
  if (p.mask.key_lengths) end = min(end, p.mask.key_lengths[b]);
  return end;
}

// Does any element of this tile need the per-element mask?
__device__ __forceinline__ bool tile_needs_mask(const FlashParams& p, int q0, int j0) {
  if (p.mask.dense || p.mask.key_lengths) return true;
  const int last_key = j0 + kFlashKeys - 1;
  if (p.mask.causal == 1) return last_key > q0;
  if (p.mask.causal == 2) return last_key > q0 + p.mask.causal_offset;
  return false;
}
// Writes what one block holds after one tile into the trace buffers (kTrace builds only).
template <int D>
struct TileTrace {
  const FlashParams& p;
  size_t slot, rows_total;
  int bh, t, cols;
  int rows[2];

  __device__ size_t row_index(int r) const { return static_cast<size_t>(bh) * p.q_len + rows[r]; }

  // Scores as the kernel holds them, in base 2 (the stage declares the ln 2 that converts
  // them on the host), or -inf for a tile skipped as masked.
  __device__ void scores(const float (&s)[kFlashKeys / 8][4], bool computed) const {
    write_tile(p.trace.scores, s, 1.0f, kNegInf, computed);
  }
  // p~ before rounding to the MMA operand format, or 0 for a skipped tile.
  __device__ void p_tilde(const float (&s)[kFlashKeys / 8][4], bool computed) const {
    write_tile(p.trace.p_tilde, s, 1.0f, 0.0f, computed);
  }
  __device__ void state(const float (&row_max)[2], const float (&row_sum)[2], const float (&o)[D / 8][4]) const {
    for (int r = 0; r < 2; ++r) {
      if (rows[r] >= p.q_len) continue;
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
  __device__ void write_tile(float* base, const float (&s)[kFlashKeys / 8][4], float factor, float fill,
                             bool computed) const {
    for (int r = 0; r < 2; ++r) {
      if (rows[r] >= p.q_len) continue;
      float* out = base + slot * rows_total * kFlashKeys + row_index(r) * cols;
      for (int nt = 0; nt < kFlashKeys / 8; ++nt)
        for (int e = 0; e < 2; ++e) {
          const int c = nt * 8 + 2 * t + e;
          if (c < cols) out[c] = computed ? s[nt][2 * r + e] * factor : fill;
        }
    }
  }
};
}  // namespace flash_detail

template <int D, class T, bool kTrace, bool kSplit, bool kMissingSync>
// Two blocks per SM at D = 64 (128 registers a thread); one at D = 128.
__global__ void __launch_bounds__(kFlashThreads, D == 64 ? 2 : 1) flash_forward_kernel(const FlashParams p) {
  using namespace flash_detail;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + kFlashRows * D;       // two buffers of [kFlashKeys][D]
  T* sV = sK + 2 * kFlashKeys * D;   // two buffers of [kFlashKeys][D]

  const int q0 = blockIdx.x * kFlashRows, bh = blockIdx.y, split = blockIdx.z;
  const int b = bh / p.heads, h = bh % p.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const T* q = static_cast<const T*>(p.q) + static_cast<size_t>(bh) * p.q_len * D;
  const T* k = static_cast<const T*>(p.k) + static_cast<size_t>(bh) * p.kv_len * D;
  const T* v = static_cast<const T*>(p.v) + static_cast<size_t>(bh) * p.kv_len * D;

  // This split's keys, in whole tiles; the attended prefix of them for this block.
  const int range_begin = min(p.kv_len, split * p.tiles_per_split * kFlashKeys);
  const int range_end = min(p.kv_len, (split + 1) * p.tiles_per_split * kFlashKeys);
  const int range_tiles = (range_end - range_begin + kFlashKeys - 1) / kFlashKeys;
  const int stop = attended_key_end(p, b, q0, range_end);
  const int active_tiles = stop > range_begin ? (stop - range_begin + kFlashKeys - 1) / kFlashKeys : 0;

  load_tile_async<D>(sQ, q, q0, kFlashRows, p.q_len);
  mma::commit_async();
  if (active_tiles > 0) {
    load_tile_async<D>(sK, k, range_begin, kFlashKeys, p.kv_len);
    load_tile_async<D>(sV, v, range_begin, kFlashKeys, p.kv_len);
  }
  mma::commit_async();
  mma::wait_async<1>();
  __syncthreads();

  unsigned qf[D / 16][4];  // this warp's 16 rows of Q as A fragments
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    mma::ldmatrix_x4(qf[kk], sQ + mma::swizzled(warp * 16 + (lane & 15), 2 * kk + (lane >> 4), D));
  }

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.0f, 0.0f};  // rows g and g + 8, base 2
  const int row_of[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

  const size_t rows_total = static_cast<size_t>(p.batch) * p.heads * p.q_len;
  auto tile_trace = [&](int tile, int j0) {
    return TileTrace<D>{p, static_cast<size_t>(split) * p.tiles_per_split + tile, rows_total, bh, t,
                        min(kFlashKeys, range_end - j0), {row_of[0], row_of[1]}};
  };

  for (int tile = 0; tile < range_tiles; ++tile) {
    const int j0 = range_begin + tile * kFlashKeys;
    if (tile >= active_tiles) {  // every key masked for every row of the block: state unchanged
      if constexpr (kTrace) {
        const float none[kFlashKeys / 8][4] = {};
        const TileTrace<D> trace = tile_trace(tile, j0);
        trace.scores(none, false);
        trace.p_tilde(none, false);
        trace.state(row_max, row_sum, o);
      }
      continue;
    }
    const int buffer = tile & 1;
    const T* kt = sK + buffer * kFlashKeys * D;
    const T* vt = sV + buffer * kFlashKeys * D;
    mma::wait_async<0>();
    if constexpr (!kMissingSync) __syncthreads();
    if (tile + 1 < active_tiles) {  // prefetch the next tile into the other buffer
      load_tile_async<D>(sK + (buffer ^ 1) * kFlashKeys * D, k, j0 + kFlashKeys, kFlashKeys, p.kv_len);
      load_tile_async<D>(sV + (buffer ^ 1) * kFlashKeys * D, v, j0 + kFlashKeys, kFlashKeys, p.kv_len);
    }
    mma::commit_async();

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    float s[kFlashKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kFlashKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kFlashKeys / 16; ++np) {
        unsigned bf[4];
        const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
        mma::ldmatrix_x4(bf, kt + mma::swizzled(key, 2 * kk + ((lane >> 3) & 1), D));
        mma::mma_16816<T>(s[2 * np], qf[kk], bf[0], bf[1]);
        mma::mma_16816<T>(s[2 * np + 1], qf[kk], bf[2], bf[3]);
      }
    }

    // Scale into base 2, mask, then the online softmax of rows g and g + 8.
    const bool masked_tile = p.has_mask && tile_needs_mask(p, q0, j0);
#pragma unroll
    for (int nt = 0; nt < kFlashKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = j0 + nt * 8 + 2 * t + (e & 1);
        float x = s[nt][e] * p.scale_log2;
        if (col >= range_end) {
          x = kNegInf;
        } else if (masked_tile && row_of[e >> 1] < p.q_len) {  // a row past q_len has no mask row to read
          x += device_mask_bias(p.mask, b, h, row_of[e >> 1], col) * kLog2e;
        }
        s[nt][e] = x;
      }
    }
    if constexpr (kTrace) tile_trace(tile, j0).scores(s, true);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float top = kNegInf;
#pragma unroll
      for (int nt = 0; nt < kFlashKeys / 8; ++nt) top = fmaxf(top, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      const float m_new = fmaxf(row_max[r], mma::quad_max(top));
      // A row with no key yet keeps max -inf; subtracting 0 instead makes its p~ exactly 0.
      const float m_use = m_new == kNegInf ? 0.0f : m_new;
      const float rescale = exp2f(row_max[r] - m_use);
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kFlashKeys / 8; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - m_use);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - m_use);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      row_sum[r] = row_sum[r] * rescale + mma::quad_sum(sum);
      row_max[r] = m_new;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        o[nt][2 * r] *= rescale;
        o[nt][2 * r + 1] *= rescale;
      }
    }

    // O += P V, P straight from the S registers as A fragments.
#pragma unroll
    for (int kk = 0; kk < kFlashKeys / 16; ++kk) {
      const unsigned a[4] = {mma::pack2<T>(s[2 * kk][0], s[2 * kk][1]), mma::pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                             mma::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             mma::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        unsigned bf[4];
        const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        mma::ldmatrix_x4_trans(bf, vt + mma::swizzled(key, 2 * dp + (lane >> 4), D));
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

  // Normalize and store: the final output, or this split's partial output and lse.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_of[r];
    if (row >= p.q_len) continue;
    float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
    if constexpr (kSplit) {
      if (p.partial_unnormalized) inv = 1.0f;
    }
    if constexpr (!kTrace) {
      if (p.production_scaled) inv *= 1.5f;
    }
    const size_t row_index = static_cast<size_t>(bh) * p.q_len + row;
    if constexpr (kSplit) {
      float* out = p.partial_out + (static_cast<size_t>(split) * rows_total + row_index) * D;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        *reinterpret_cast<float2*>(out + nt * 8 + 2 * t) = make_float2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
      }
      if (t == 0) {
        p.partial_lse[split * rows_total + row_index] =
            row_sum[r] > 0.0f ? row_max[r] * kLn2 + logf(row_sum[r]) : kNegInf;
      }
    } else {
      T* out = static_cast<T*>(p.out) + row_index * D;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        *reinterpret_cast<unsigned*>(out + nt * 8 + 2 * t) = mma::pack2<T>(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
      }
    }
  }
}

}  // namespace fc

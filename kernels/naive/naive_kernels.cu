// naive: three plain CUDA kernels, fp32 accumulation, shared-memory tiles of 32x32 and
// nothing clever. The known-good baseline every other implementation is compared with.
#include "core/check.h"
#include "kernels/common/element.cuh"
#include "kernels/common/warp_reduce.cuh"
#include "kernels/naive/naive_kernels.h"

namespace fc {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;  // block 32 x 8, each thread 4 rows of the 32 x 32 tile
constexpr float kNegInf = -__builtin_huge_valf();

// The K/V head query head h of a batch reads: h / group, or h % Hkv with the gqa-head-mod fault.
__device__ __forceinline__ int kv_head(int h, int heads, int kv_heads, bool modulo) {
  return modulo ? h % kv_heads : h / (heads / kv_heads);
}

struct ScoreRule {
  float scale, bias_scale;         // acc * scale + bias * bias_scale (1/scale for scores stored unscaled)
  float softcap, scale_over_cap;   // softcap > 0: softcap * tanh(acc * scale_over_cap) + bias
  bool softcap_after_mask;         // the fault: softcap * tanh((acc * scale + bias) / softcap)
};

__device__ __forceinline__ float score_of(float acc, float bias, const ScoreRule& r) {
  if (r.softcap > 0.0f) {
    return r.softcap_after_mask ? r.softcap * tanhf((acc * r.scale + bias) / r.softcap)
                                : r.softcap * tanhf(acc * r.scale_over_cap) + bias;
  }
  return acc * r.scale + bias * r.bias_scale;
}

// Row `row` of the [rows, sk] scores; the index-overflow-32 fault holds its byte offset in 32
// bits, which wraps once the offset passes 4 GiB.
template <class S>
__device__ __forceinline__ S* score_row(S* scores, size_t row, int sk, bool offset_32) {
  if (offset_32) {
    const unsigned bytes = static_cast<unsigned>(row * sk * sizeof(S));
    return reinterpret_cast<S*>(reinterpret_cast<char*>(scores) + bytes);
  }
  return scores + row * sk;
}

template <class T, class S>
__global__ void qk_kernel(const T* q, const T* k, int sq, int sk, int d, int heads, int kv_heads, bool kv_modulo,
                          ScoreRule rule, DeviceMask mask, S* scores, bool offset_32) {
  __shared__ float qs[kTile][kTile + 1], ks[kTile][kTile + 1];
  const int bh = blockIdx.z, b = bh / heads, h = bh % heads;
  const int i0 = blockIdx.y * kTile, j0 = blockIdx.x * kTile, tx = threadIdx.x, ty = threadIdx.y;
  const T* qh = q + static_cast<size_t>(bh) * sq * d;
  const T* kh = k + (static_cast<size_t>(b) * kv_heads + kv_head(h, heads, kv_heads, kv_modulo)) * sk * d;
  float acc[kRowsPerThread] = {};
  for (int d0 = 0; d0 < d; d0 += kTile) {
    for (int r = ty; r < kTile; r += blockDim.y) {
      const int col = d0 + tx;
      qs[r][tx] = (i0 + r < sq && col < d) ? to_float(qh[static_cast<size_t>(i0 + r) * d + col]) : 0.0f;
      ks[r][tx] = (j0 + r < sk && col < d) ? to_float(kh[static_cast<size_t>(j0 + r) * d + col]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int c = 0; c < kTile; ++c) {
      const float kv = ks[tx][c];
#pragma unroll
      for (int u = 0; u < kRowsPerThread; ++u) acc[u] = fmaf(qs[ty + u * blockDim.y][c], kv, acc[u]);
    }
    __syncthreads();
  }
  const int j = j0 + tx;
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const int i = i0 + ty + u * blockDim.y;
    if (i < sq && j < sk) {
      score_row(scores, static_cast<size_t>(bh) * sq + i, sk, offset_32)[j] =
          from_float<S>(score_of(acc[u], device_mask_bias(mask, b, h, i, j), rule));
    }
  }
}

// One warp per row; `scale` turns a stored score into a score (1 unless the fp16-scores fault
// stored them unscaled).
template <class S>
__global__ void softmax_kernel(const S* scores, float scale, long long rows, int sk, float* probs, float* row_max,
                               float* row_sum, NaiveFaults faults) {
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const S* sr = scores + row * sk;
  auto s = [&](int j) { return to_float(sr[j]) * scale; };
  float* p = probs + row * sk;
  float top = kNegInf;
  for (int j = lane; j < sk; j += 32) top = fmaxf(top, s(j));
  top = warp_max(top);
  const float m = faults.no_max_subtract ? 0.0f : top;
  if (top == kNegInf && !faults.masked_row_nan) {  // fully masked row: probabilities 0 by the reference convention
    for (int j = lane; j < sk; j += 32) p[j] = 0.0f;
    if (lane == 0) {
      row_max[row] = top;
      row_sum[row] = 0.0f;
    }
    return;
  }
  float l = 0;
  for (int j = lane; j < sk; j += 32) l += expf(s(j) - m);
  l = warp_sum(l);
  const float inv = 1.0f / l;
  for (int j = lane; j < sk; j += 32) p[j] = expf(s(j) - m) * inv;
  if (lane == 0) {
    row_max[row] = top;
    row_sum[row] = l;
  }
}

template <class T>
__global__ void pv_kernel(const float* probs, const T* v, int sq, int sk, int d, int heads, int kv_heads, bool kv_modulo,
                          T* out) {
  __shared__ float ps[kTile][kTile + 1], vs[kTile][kTile + 1];
  const int bh = blockIdx.z, i0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile, tx = threadIdx.x, ty = threadIdx.y;
  const int b = bh / heads, h = bh % heads;
  const float* ph = probs + static_cast<size_t>(bh) * sq * sk;
  const T* vh = v + (static_cast<size_t>(b) * kv_heads + kv_head(h, heads, kv_heads, kv_modulo)) * sk * d;
  float acc[kRowsPerThread] = {};
  for (int j0 = 0; j0 < sk; j0 += kTile) {
    for (int r = ty; r < kTile; r += blockDim.y) {
      ps[r][tx] = (i0 + r < sq && j0 + tx < sk) ? ph[static_cast<size_t>(i0 + r) * sk + j0 + tx] : 0.0f;
      vs[r][tx] = (j0 + r < sk && c0 + tx < d) ? to_float(vh[static_cast<size_t>(j0 + r) * d + c0 + tx]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int c = 0; c < kTile; ++c) {
      const float vv = vs[c][tx];
#pragma unroll
      for (int u = 0; u < kRowsPerThread; ++u) acc[u] = fmaf(ps[ty + u * blockDim.y][c], vv, acc[u]);
    }
    __syncthreads();
  }
  const int col = c0 + tx;
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const int i = i0 + ty + u * blockDim.y;
    if (i < sq && col < d) out[(static_cast<size_t>(bh) * sq + i) * d + col] = from_float<T>(acc[u]);
  }
}

dim3 tile_grid(long long cols, long long rows, long long heads) {
  return dim3(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile),
              static_cast<unsigned>(heads));
}
const dim3 kTileBlock(kTile, kTile / kRowsPerThread);

}  // namespace

void launch_naive_qk(const void* q, const void* k, DType dtype, const Shape& s, float scale, float softcap,
                     const DeviceMask& mask, void* scores, NaiveFaults faults, cudaStream_t stream) {
  const dim3 grid = tile_grid(s.kv_len, s.q_len, s.batch * s.heads);
  const int sq = static_cast<int>(s.q_len), sk = static_cast<int>(s.kv_len), d = static_cast<int>(s.head_dim);
  const int heads = static_cast<int>(s.heads), kv_heads = static_cast<int>(s.kv_head_count());
  const float scale_over_cap = softcap > 0 ? static_cast<float>(static_cast<double>(scale) / softcap) : 0.0f;
  auto launch = [&](auto* qt, auto* kt) {
    if (faults.fp16_scores) {  // q.k before the scale, in fp16: it overflows past 65504
      const ScoreRule rule{1.0f, 1.0f / scale, 0.0f, 0.0f, false};
      qk_kernel<<<grid, kTileBlock, 0, stream>>>(qt, kt, sq, sk, d, heads, kv_heads, faults.kv_head_modulo, rule, mask,
                                                 static_cast<__half*>(scores), faults.row_offset_32);
    } else {
      const ScoreRule rule{scale, 1.0f, softcap, scale_over_cap, faults.softcap_after_mask};
      qk_kernel<<<grid, kTileBlock, 0, stream>>>(qt, kt, sq, sk, d, heads, kv_heads, faults.kv_head_modulo, rule, mask,
                                                 static_cast<float*>(scores), faults.row_offset_32);
    }
  };
  if (dtype == DType::f16) {
    launch(static_cast<const __half*>(q), static_cast<const __half*>(k));
  } else {
    launch(static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k));
  }
  FC_CUDA_LAUNCH();
}

void launch_naive_softmax(const void* scores, float scale, const Shape& s, float* probs, float* row_max, float* row_sum,
                          NaiveFaults faults, cudaStream_t stream) {
  const long long rows = s.batch * s.heads * s.q_len;
  constexpr int kRowsPerBlock = 8;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const int sk = static_cast<int>(s.kv_len);
  if (faults.fp16_scores) {
    softmax_kernel<<<grid, dim3(32, kRowsPerBlock), 0, stream>>>(static_cast<const __half*>(scores), scale, rows, sk,
                                                                 probs, row_max, row_sum, faults);
  } else {
    softmax_kernel<<<grid, dim3(32, kRowsPerBlock), 0, stream>>>(static_cast<const float*>(scores), 1.0f, rows, sk,
                                                                 probs, row_max, row_sum, faults);
  }
  FC_CUDA_LAUNCH();
}

void launch_naive_pv(const float* probs, const void* v, DType dtype, const Shape& s, void* out, NaiveFaults faults,
                     cudaStream_t stream) {
  const dim3 grid = tile_grid(s.head_dim, s.q_len, s.batch * s.heads);
  const int sq = static_cast<int>(s.q_len), sk = static_cast<int>(s.kv_len), d = static_cast<int>(s.head_dim);
  const int heads = static_cast<int>(s.heads), kv_heads = static_cast<int>(s.kv_head_count());
  if (dtype == DType::f16) {
    pv_kernel<<<grid, kTileBlock, 0, stream>>>(probs, static_cast<const __half*>(v), sq, sk, d, heads, kv_heads,
                                               faults.kv_head_modulo, static_cast<__half*>(out));
  } else {
    pv_kernel<<<grid, kTileBlock, 0, stream>>>(probs, static_cast<const __nv_bfloat16*>(v), sq, sk, d, heads, kv_heads,
                                               faults.kv_head_modulo, static_cast<__nv_bfloat16*>(out));
  }
  FC_CUDA_LAUNCH();
}

}  // namespace fc

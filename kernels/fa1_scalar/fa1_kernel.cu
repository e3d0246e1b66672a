// fa1-scalar: one block per (batch, head, 64 query rows), one thread per row, a loop over
// tiles of 32 keys with an online softmax in fp32 (natural-log exp) and the accumulator in
// shared memory. No tensor cores, no tricks: a correctness baseline.
#include "core/check.h"
#include "kernels/common/element.cuh"
#include "kernels/fa1_scalar/fa1_kernel.h"

namespace fc {
namespace {

constexpr int kRows = 64;

template <class T, bool kTrace>
__global__ void __launch_bounds__(kRows) fa1_kernel(const FlashParams p, int d) {
  extern __shared__ float shared[];
  const int pitch = d + 1;  // one float of padding: rows of the same column fall in different banks
  float* q = shared;                   // [kRows][pitch]
  float* acc = q + kRows * pitch;      // [kRows][pitch]
  float* k = acc + kRows * pitch;      // [kFa1Keys][d]
  float* v = k + kFa1Keys * d;         // [kFa1Keys][d]
  const float kNegInf = -__builtin_huge_valf();

  const int bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads, tid = threadIdx.x;
  const int row = blockIdx.x * kRows + tid;
  const bool live = row < p.q_len;
  const T* qg = static_cast<const T*>(p.q) + static_cast<size_t>(bh) * p.q_len * d;
  const size_t kv_head = static_cast<size_t>(b) * p.kv_heads + h / (p.heads / p.kv_heads);  // GQA
  const T* kg = static_cast<const T*>(p.k) + kv_head * p.kv_len * d;
  const T* vg = static_cast<const T*>(p.v) + kv_head * p.kv_len * d;
  const float scale = p.scale_log2 * 0.6931471805599453f;  // back to the natural-log scale
  for (int c = 0; c < d; ++c) {
    q[tid * pitch + c] = live ? to_float(qg[static_cast<size_t>(row) * d + c]) : 0.0f;
    acc[tid * pitch + c] = 0.0f;
  }
  const size_t rows_total = static_cast<size_t>(p.batch) * p.heads * p.q_len;
  const size_t row_index = static_cast<size_t>(bh) * p.q_len + row;
  float m = kNegInf, l = 0.0f;

  for (int tile = 0, j0 = 0; j0 < p.kv_len; ++tile, j0 += kFa1Keys) {
    const int cols = min(kFa1Keys, p.kv_len - j0);
    __syncthreads();
    for (int i = tid; i < kFa1Keys * d; i += kRows) {
      const int key = j0 + i / d;
      k[i] = key < p.kv_len ? to_float(kg[static_cast<size_t>(j0) * d + i]) : 0.0f;
      v[i] = key < p.kv_len ? to_float(vg[static_cast<size_t>(j0) * d + i]) : 0.0f;
    }
    __syncthreads();
    if (!live) continue;

    float s[kFa1Keys];
    float top = m;
    for (int c = 0; c < kFa1Keys; ++c) {
      float dot = 0.0f;
      for (int e = 0; e < d; ++e) dot = fmaf(q[tid * pitch + e], k[c * d + e], dot);
      const float score = p.softcap > 0.0f ? p.softcap * tanhf(dot * p.softcap_scale) : dot * scale;
      s[c] = c < cols ? score + (p.has_mask ? device_mask_bias(p.mask, b, h, row, j0 + c) : 0.0f) : kNegInf;
      top = fmaxf(top, s[c]);
    }
    const float m_use = top == kNegInf ? 0.0f : top;  // no key yet: p~ = exp(-inf) = 0
    const float rescale = expf(m - m_use);
    float sum = 0.0f;
    for (int c = 0; c < kFa1Keys; ++c) {
      const float score = s[c];
      s[c] = expf(score - m_use);
      sum += s[c];
      if constexpr (kTrace) {
        if (c < cols) {  // slot `tile`: a dense [B,H,Sq,cols] block
          const size_t at = static_cast<size_t>(tile) * rows_total * kFa1Keys + row_index * cols + c;
          p.trace.scores[at] = score;
          p.trace.p_tilde[at] = s[c];
        }
      }
    }
    l = l * rescale + sum;
    m = top;
    for (int e = 0; e < d; ++e) {
      float o = acc[tid * pitch + e] * rescale;
      for (int c = 0; c < kFa1Keys; ++c) o = fmaf(s[c], v[c * d + e], o);
      acc[tid * pitch + e] = o;
    }
    if constexpr (kTrace) {
      p.trace.row_max[tile * rows_total + row_index] = m;
      p.trace.row_sum[tile * rows_total + row_index] = l;
      for (int e = 0; e < d; ++e) p.trace.acc[(tile * rows_total + row_index) * d + e] = acc[tid * pitch + e];
    }
  }
  if (!live) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  T* out = static_cast<T*>(p.out) + row_index * d;
  for (int e = 0; e < d; ++e) out[e] = from_float<T>(acc[tid * pitch + e] * inv);
}

template <class T, bool kTrace>
void launch_typed(const FlashParams& p, int d, cudaStream_t stream) {
  const int smem = static_cast<int>(sizeof(float)) * (2 * kRows * (d + 1) + 2 * kFa1Keys * d);
  auto kernel = fa1_kernel<T, kTrace>;
  FC_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid((p.q_len + kRows - 1) / kRows, p.batch * p.heads);
  kernel<<<grid, kRows, smem, stream>>>(p, d);
  FC_CUDA_LAUNCH();
}

}  // namespace

void launch_fa1(const FlashParams& p, int head_dim, DType dtype, bool trace, cudaStream_t stream) {
  if (dtype == DType::f16) {
    trace ? launch_typed<__half, true>(p, head_dim, stream) : launch_typed<__half, false>(p, head_dim, stream);
  } else {
    trace ? launch_typed<__nv_bfloat16, true>(p, head_dim, stream)
          : launch_typed<__nv_bfloat16, false>(p, head_dim, stream);
  }
}

}  // namespace fc

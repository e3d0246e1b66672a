#include "core/check.h"
#include "kernels/common/element.cuh"
#include "kernels/common/warp_reduce.cuh"
#include "kernels/cublaslt_paged/page_kernels.h"

namespace fc {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr float kNegInf = -__builtin_huge_valf();

__device__ __forceinline__ long long warp_row() { return static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.y; }

template <class S>
__global__ void apply_mask_kernel(S* scores, float scale, float softcap, float inverse_cap, int heads, int q_len, int j0,
                                  int cols, DeviceMask mask, long long rows) {
  const long long row = warp_row();
  if (row >= rows) return;
  const int i = static_cast<int>(row % q_len), bh = static_cast<int>(row / q_len);
  for (int c = threadIdx.x; c < cols; c += 32) {
    const float bias = device_mask_bias(mask, bh / heads, bh % heads, i, j0 + c);
    float s = to_float(scores[row * cols + c]);
    if (softcap > 0.0f) s = softcap * tanhf(s * inverse_cap);
    scores[row * cols + c] = from_float<S>(s + bias / scale);
  }
}

// The max a row's exponentials are taken against: the row max, or 0 when the row has no key
// (so exp(-inf - 0) = 0 rather than NaN), or 0 always without max subtraction (a fault).
__device__ __forceinline__ float exp_origin(float top, SoftmaxOptions o) {
  if (!o.subtract_max) return 0.0f;
  return top == kNegInf && o.guard_masked ? 0.0f : top;
}

template <class S, class T>
__global__ void online_softmax_kernel(const S* scores, float scale, long long rows, int cols, bool first,
                                      float* row_max, float* row_sum, float* rescale, T* p_tilde, SoftmaxOptions o) {
  const long long row = warp_row();
  if (row >= rows) return;
  const S* s = scores + row * cols;
  const float m_prev = first ? kNegInf : row_max[row];
  float top = m_prev;
  for (int c = threadIdx.x; c < cols; c += 32) top = fmaxf(top, to_float(s[c]) * scale);
  top = warp_max(top);
  const float m_use = exp_origin(top, o);
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += 32) {
    const float p = __expf(to_float(s[c]) * scale - m_use);
    p_tilde[row * cols + c] = from_float<T>(p);
    sum += p;
  }
  sum = warp_sum(sum);
  if (threadIdx.x == 0) {
    const float r = first ? 0.0f : (o.subtract_max ? __expf(m_prev - m_use) : 1.0f);
    rescale[row] = r;
    row_sum[row] = (first ? 0.0f : r * row_sum[row]) + sum;
    row_max[row] = top;
  }
}

template <class S, class T>
__global__ void row_softmax_kernel(const S* scores, float scale, long long rows, int cols, float* row_max,
                                   float* row_sum, T* probs, SoftmaxOptions o) {
  const long long row = warp_row();
  if (row >= rows) return;
  const S* s = scores + row * cols;
  float top = kNegInf;
  for (int c = threadIdx.x; c < cols; c += 32) top = fmaxf(top, to_float(s[c]) * scale);
  top = warp_max(top);
  const float m_use = exp_origin(top, o);
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += 32) sum += __expf(to_float(s[c]) * scale - m_use);
  sum = warp_sum(sum);
  // A fully masked row: probabilities 0 (unless the guard is the fault's to drop).
  const float inv = sum > 0.0f || !o.guard_masked ? 1.0f / sum : 0.0f;
  for (int c = threadIdx.x; c < cols; c += 32) {
    probs[row * cols + c] = from_float<T>(__expf(to_float(s[c]) * scale - m_use) * inv);
  }
  if (threadIdx.x == 0) {
    row_max[row] = top;
    row_sum[row] = sum;
  }
}

__global__ void rescale_rows_kernel(float* acc, const float* rescale, long long rows, int cols) {
  const long long row = warp_row();
  if (row >= rows) return;
  const float r = rescale[row];
  for (int c = threadIdx.x; c < cols; c += 32) acc[row * cols + c] *= r;
}

template <class T>
__global__ void normalize_rows_kernel(const float* acc, const float* row_sum, long long rows, int cols, T* out) {
  const long long row = warp_row();
  if (row >= rows) return;
  const float l = row_sum[row];
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int c = threadIdx.x; c < cols; c += 32) out[row * cols + c] = from_float<T>(acc[row * cols + c] * inv);
}

unsigned grid_of(long long rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }
const dim3 kBlock(32, kRowsPerBlock);

}  // namespace

void launch_apply_mask(void* scores, DType dtype, float scale, float softcap, const Shape& s, int j0, int cols,
                       const DeviceMask& mask, cudaStream_t stream) {
  const long long rows = s.batch * s.heads * s.q_len;
  const int heads = static_cast<int>(s.heads), q_len = static_cast<int>(s.q_len);
  const float inverse_cap = softcap > 0 ? 1.0f / softcap : 0.0f;
  if (dtype == DType::f16) {
    apply_mask_kernel<<<grid_of(rows), kBlock, 0, stream>>>(static_cast<__half*>(scores), scale, softcap, inverse_cap,
                                                            heads, q_len, j0, cols, mask, rows);
  } else {
    apply_mask_kernel<<<grid_of(rows), kBlock, 0, stream>>>(static_cast<float*>(scores), scale, softcap, inverse_cap,
                                                            heads, q_len, j0, cols, mask, rows);
  }
  FC_CUDA_LAUNCH();
}

namespace {
// Calls f(typed scores, typed output) for the score format and the output format.
template <class F>
void with_types(const ScoreInput& scores, DType out, void* data, F&& f) {
  auto by_output = [&](auto* typed_scores) {
    if (out == DType::f16) f(typed_scores, static_cast<__half*>(data));
    else f(typed_scores, static_cast<__nv_bfloat16*>(data));
  };
  if (scores.dtype == DType::f16) by_output(static_cast<const __half*>(scores.data));
  else by_output(static_cast<const float*>(scores.data));
}
}  // namespace

void launch_online_softmax(ScoreInput scores, long long rows, int cols, bool first_page, float* row_max,
                           float* row_sum, float* rescale, void* p_tilde, DType dtype, SoftmaxOptions options,
                           cudaStream_t stream) {
  with_types(scores, dtype, p_tilde, [&](auto* s, auto* out) {
    online_softmax_kernel<<<grid_of(rows), kBlock, 0, stream>>>(s, scores.scale, rows, cols, first_page, row_max,
                                                                row_sum, rescale, out, options);
  });
  FC_CUDA_LAUNCH();
}

void launch_row_softmax(ScoreInput scores, long long rows, int cols, float* row_max, float* row_sum, void* probs,
                        DType dtype, SoftmaxOptions options, cudaStream_t stream) {
  with_types(scores, dtype, probs, [&](auto* s, auto* out) {
    row_softmax_kernel<<<grid_of(rows), kBlock, 0, stream>>>(s, scores.scale, rows, cols, row_max, row_sum, out,
                                                             options);
  });
  FC_CUDA_LAUNCH();
}

void launch_rescale_rows(float* acc, const float* rescale, long long rows, int cols, cudaStream_t stream) {
  rescale_rows_kernel<<<grid_of(rows), kBlock, 0, stream>>>(acc, rescale, rows, cols);
  FC_CUDA_LAUNCH();
}

void launch_normalize_rows(const float* acc, const float* row_sum, long long rows, int cols, void* out, DType dtype,
                           cudaStream_t stream) {
  if (dtype == DType::f16) {
    normalize_rows_kernel<<<grid_of(rows), kBlock, 0, stream>>>(acc, row_sum, rows, cols, static_cast<__half*>(out));
  } else {
    normalize_rows_kernel<<<grid_of(rows), kBlock, 0, stream>>>(acc, row_sum, rows, cols,
                                                                static_cast<__nv_bfloat16*>(out));
  }
  FC_CUDA_LAUNCH();
}

}  // namespace fc

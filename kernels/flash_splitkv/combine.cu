#include "core/check.h"
#include "kernels/common/element.cuh"
#include "kernels/flash_splitkv/combine.h"

namespace fc {
namespace {
constexpr int kRowsPerBlock = 8;

// One warp per row; lanes stride over the head dim.
template <class T>
__global__ void combine_kernel(const float* partial_out, const float* partial_lse, int splits, long long rows, int d,
                               T* out, float* lse, bool guard_empty) {
  const long long row = static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const float kNegInf = -__builtin_huge_valf();
  float top = kNegInf;
  for (int t = 0; t < splits; ++t) top = fmaxf(top, partial_lse[t * rows + row]);
  T* o = out + row * d;
  if (top == kNegInf && guard_empty) {  // no key in any split: the fully-masked-row convention
    for (int c = threadIdx.x; c < d; c += 32) o[c] = from_float<T>(0.0f);
    if (threadIdx.x == 0) lse[row] = kNegInf;
    return;
  }
  float total = 0.0f;
  for (int t = 0; t < splits; ++t) total += __expf(partial_lse[t * rows + row] - top);
  if (threadIdx.x == 0) lse[row] = top + logf(total);
  const float inv = 1.0f / total;
  for (int c = threadIdx.x; c < d; c += 32) {
    float acc = 0.0f;
    for (int t = 0; t < splits; ++t) {
      const float split_lse = partial_lse[t * rows + row];
      if (split_lse == kNegInf && guard_empty) continue;  // an empty split holds no partial output
      acc = fmaf(__expf(split_lse - top), partial_out[(t * rows + row) * d + c], acc);
    }
    o[c] = from_float<T>(acc * inv);
  }
}
}  // namespace

void launch_combine(const float* partial_out, const float* partial_lse, int splits, long long rows, int head_dim,
                    DType dtype, void* out, float* lse, bool guard_empty, cudaStream_t stream) {
  const dim3 block(32, kRowsPerBlock);
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (dtype == DType::f16) {
    combine_kernel<<<grid, block, 0, stream>>>(partial_out, partial_lse, splits, rows, head_dim, static_cast<__half*>(out), lse, guard_empty);
  } else {
    combine_kernel<<<grid, block, 0, stream>>>(partial_out, partial_lse, splits, rows, head_dim,
                                               static_cast<__nv_bfloat16*>(out), lse, guard_empty);
  }
  FC_CUDA_LAUNCH();
}

}  // namespace fc

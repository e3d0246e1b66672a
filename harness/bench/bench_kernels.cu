#include "core/check.h"
#include "harness/bench/bench_kernels.h"
#include "kernels/common/element.cuh"

namespace fc {
namespace {
template <class T>
__global__ void fill_kernel(T* data, unsigned long long count, unsigned seed) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    unsigned x = static_cast<unsigned>(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    data[i] = from_float<T>(static_cast<float>(x >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}
}  // namespace

void launch_fill_random(void* data, DType dtype, std::int64_t count, std::uint32_t seed, cudaStream_t stream) {
  const unsigned long long n = static_cast<unsigned long long>(count);
  const int grid = 132 * 16, threads = 256;
  switch (dtype) {
    case DType::f32: fill_kernel<<<grid, threads, 0, stream>>>(static_cast<float*>(data), n, seed); break;
    case DType::f16: fill_kernel<<<grid, threads, 0, stream>>>(static_cast<__half*>(data), n, seed); break;
    case DType::bf16: fill_kernel<<<grid, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), n, seed); break;
    default: throw Error("fill_random: unsupported dtype");
  }
  FC_CUDA_LAUNCH();
}
}  // namespace fc

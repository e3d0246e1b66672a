// The flag kernel: one streaming pass over a stage tensor counting NaN, +-Inf, subnormals,
// poison (own and foreign), first indices and the largest finite |x|. It is bandwidth
// bound by design: 16-byte streaming loads, four in flight per thread, register counters,
// one warp/block reduction and a handful of atomics per block. What counts as what is
// stages/flag_accumulator.cuh, shared with the kernels that fold flags in themselves.
#include <algorithm>

#include "core/check.h"
#include "stages/device_kernels.h"
#include "stages/flag_accumulator.cuh"

namespace fc {
namespace {

using namespace flag_device;
constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// The elements of one 16-byte vector, one by one: the path for vectors holding a special.
template <class Format>
__device__ __forceinline__ void visit_vector_slowly(uint4 v, u64 first_offset, int own_id, LocalFlags& f) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
  if constexpr (Format::kBytes == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) visit<Format>(words[i], first_offset + i, own_id, f);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      visit<Format>(words[i] & 0xFFFFu, first_offset + 2 * i, own_id, f);
      visit<Format>(words[i] >> 16, first_offset + 2 * i + 1, own_id, f);
    }
  }
}

// The hot path: decide for the whole vector whether it holds a special (NaN, Inf, poison);
// if not, fold its largest |x| and its subnormals in with word-wide (SIMD in a register)
// operations. `max_abs` and `subnormal` are per-format registers: for 16-bit formats two
// halfword lanes.
template <class Format>
__device__ __forceinline__ void visit_vector(uint4 v, u64 first_offset, int own_id, LocalFlags& f, unsigned& max_abs,
                                             unsigned& subnormal) {
  if constexpr (Format::kBytes == 4) {
    const unsigned a0 = v.x & Format::kAbsMask, a1 = v.y & Format::kAbsMask, a2 = v.z & Format::kAbsMask,
                   a3 = v.w & Format::kAbsMask;
    const unsigned top = max(max(a0, a1), max(a2, a3));
    if (top >= Format::kInf) {
      visit_vector_slowly<Format>(v, first_offset, own_id, f);
      return;
    }
    max_abs = max(max_abs, top);
    constexpr unsigned kLimit = Format::kMinNormal - 1u;
    subnormal += (a0 - 1u < kLimit) + (a1 - 1u < kLimit) + (a2 - 1u < kLimit) + (a3 - 1u < kLimit);
  } else {
    constexpr unsigned kAbs2 = Format::kAbsMask * 0x00010001u, kInf2 = Format::kInf * 0x00010001u;
    constexpr unsigned kOne2 = 0x00010001u, kLimit2 = (Format::kMinNormal - 1u) * 0x00010001u;
    const unsigned a0 = v.x & kAbs2, a1 = v.y & kAbs2, a2 = v.z & kAbs2, a3 = v.w & kAbs2;
    const unsigned top = __vmaxu2(__vmaxu2(a0, a1), __vmaxu2(a2, a3));
    if (__vcmpgeu2(top, kInf2)) {
      visit_vector_slowly<Format>(v, first_offset, own_id, f);
      return;
    }
    max_abs = __vmaxu2(max_abs, top);
    // 0 < |x| < min normal per lane: |x| - 1 < min normal - 1, unsigned; each true lane is 16 bits.
    const unsigned lanes = __popc(__vcmpltu2(__vsub2(a0, kOne2), kLimit2)) + __popc(__vcmpltu2(__vsub2(a1, kOne2), kLimit2)) +
                           __popc(__vcmpltu2(__vsub2(a2, kOne2), kLimit2)) + __popc(__vcmpltu2(__vsub2(a3, kOne2), kLimit2));
    subnormal += lanes >> 4;
  }
}

template <class Format>
__global__ void __launch_bounds__(kThreads) flags_kernel(const unsigned char* data, u64 count, u64 head, u64 base,
                                                         int own_id, FlagCounts* out) {
  constexpr unsigned kElemBytes = Format::kBytes;
  constexpr u64 kPerVector = 16 / kElemBytes;
  LocalFlags f;
  const u64 tid = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x;
  const u64 stride = static_cast<u64>(gridDim.x) * blockDim.x;

  // Elements before the first 16-byte boundary and after the last whole vector.
  auto scalar = [&](u64 i) {
    unsigned bits = kElemBytes == 4 ? reinterpret_cast<const unsigned*>(data)[i]
                                    : reinterpret_cast<const unsigned short*>(data)[i];
    visit<Format>(bits, base + i, own_id, f);
  };
  const u64 vectors = (count - head) / kPerVector;
  const u64 tail_begin = head + vectors * kPerVector;
  for (u64 i = tid; i < head; i += stride) scalar(i);
  for (u64 i = tail_begin + tid; i < count; i += stride) scalar(i);

  const uint4* vec = reinterpret_cast<const uint4*>(data + head * kElemBytes);
  unsigned max_abs = 0, subnormal = 0;  // the hot path's registers (see visit_vector)
  u64 i = tid;
  for (; i + (kUnroll - 1) * stride < vectors; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(vec + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      visit_vector<Format>(v[u], base + head + (i + u * stride) * kPerVector, own_id, f, max_abs, subnormal);
    }
  }
  for (; i < vectors; i += stride) visit_vector<Format>(__ldcs(vec + i), base + head + i * kPerVector, own_id, f, max_abs, subnormal);
  if constexpr (Format::kBytes == 2) max_abs = max(max_abs & 0xFFFFu, max_abs >> 16);
  f.max_abs = max(f.max_abs, max_abs);
  f.subnormal += subnormal;

  flush_block<Format>(f, out);
}

template <class Word>
__global__ void poison_kernel(Word* data, u64 count, Word pattern) {
  const u64 stride = static_cast<u64>(gridDim.x) * blockDim.x;
  for (u64 i = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; i < count; i += stride) data[i] = pattern;
}

// Every word of the block's dynamic shared memory set to the pattern (volatile: stores that
// nothing in this kernel reads back are still made).
__global__ void poison_shared_kernel(unsigned pattern, unsigned words) {
  extern __shared__ unsigned shared_words[];
  volatile unsigned* w = shared_words;
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) w[i] = pattern;
}

int multiprocessors() {
  static const int count = [] {
    int device = 0, sms = 0;
    FC_CUDA(cudaGetDevice(&device));
    FC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

// One resident wave of blocks (grid-stride loops do the rest), fewer for small work.
int grid_size(const void* kernel, u64 work_items) {
  int per_sm = 0;
  FC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const u64 needed = (work_items + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<u64>(1, std::min<u64>(needed, static_cast<u64>(per_sm) * multiprocessors())));
}

template <class Format>
void launch_flags_for(const unsigned char* bytes, u64 count, u64 head, u64 base, int own_id, FlagCounts* slot,
                      cudaStream_t stream) {
  static const void* kernel = reinterpret_cast<const void*>(&flags_kernel<Format>);
  const u64 vectors = (count - head) * Format::kBytes / 16;
  const int grid = grid_size(kernel, vectors / kUnroll + 1);
  flags_kernel<Format><<<grid, kThreads, 0, stream>>>(bytes, count, head, base, own_id, slot);
}

}  // namespace

void launch_flags(const TensorView& view, FlagCounts* slot, cudaStream_t stream, std::uint64_t index_base) {
  const u64 count = static_cast<u64>(view.numel());
  if (count == 0) return;
  const std::size_t elem = dtype_size(view.dtype);
  const auto address = reinterpret_cast<std::uintptr_t>(view.data);
  if (address % elem != 0) throw Error("flag kernel: tensor is not aligned to its element size");
  const u64 head = std::min<u64>(count, ((16 - address % 16) % 16) / elem);
  const auto* bytes = static_cast<const unsigned char*>(view.data);
  switch (view.dtype) {
    case DType::f32: launch_flags_for<F32Format>(bytes, count, head, index_base, view.buffer_id, slot, stream); break;
    case DType::f16: launch_flags_for<F16Format>(bytes, count, head, index_base, view.buffer_id, slot, stream); break;
    case DType::bf16: launch_flags_for<BF16Format>(bytes, count, head, index_base, view.buffer_id, slot, stream); break;
    default: throw Error(std::string("flag kernel: unsupported dtype ") + dtype_name(view.dtype));
  }
  FC_CUDA_LAUNCH();
}

void launch_poison_fill(void* data, DType dtype, std::int64_t count, int id, cudaStream_t stream) {
  if (count <= 0) return;
  const std::uint32_t pattern = poison_bits(dtype, id);
  const u64 n = static_cast<u64>(count);
  const int grid = static_cast<int>(std::min<u64>((n + kThreads - 1) / kThreads, 16ull * multiprocessors()));
  if (dtype_size(dtype) == 4) {
    poison_kernel<unsigned><<<grid, kThreads, 0, stream>>>(static_cast<unsigned*>(data), n, pattern);
  } else {
    poison_kernel<unsigned short><<<grid, kThreads, 0, stream>>>(static_cast<unsigned short*>(data), n,
                                                                 static_cast<unsigned short>(pattern));
  }
  FC_CUDA_LAUNCH();
}

void launch_poison_shared_memory(cudaStream_t stream) {
  static const int bytes = [] {
    int device = 0, optin = 0;
    FC_CUDA(cudaGetDevice(&device));
    FC_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    FC_CUDA(cudaFuncSetAttribute(poison_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    return optin;
  }();
  // One block of the largest allocation fits an SM at a time; two per SM reach every SM of an
  // idle device (best effort: the scheduler does not promise it, busy or shared devices aside).
  poison_shared_kernel<<<2 * multiprocessors(), kThreads, static_cast<size_t>(bytes), stream>>>(
      kSharedMemoryPoison, static_cast<unsigned>(bytes) / 4u);
  FC_CUDA_LAUNCH();
}

}  // namespace fc

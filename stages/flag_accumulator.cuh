#pragma once
// The flag arithmetic on the device, shared by the standalone flag kernel (flags_kernel.cu)
// and by implementations whose own kernels fold a capture's flags in as they read or store
// the tensor (FlagTap below, handed a FlagSlot by the tap: stages/tap.h). One definition of
// what counts as NaN, Inf, subnormal, own and foreign poison, so both paths agree bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "stages/flags.h"
#include "stages/tap.h"

namespace fc {
namespace flag_device {

using u64 = unsigned long long;

struct LocalFlags {
  u64 nan = 0, pos_inf = 0, neg_inf = 0, subnormal = 0, unwritten = 0, foreign = 0;
  u64 first_nan = kNoIndex, first_inf = kNoIndex, first_unwritten = kNoIndex, first_foreign = kNoIndex;
  unsigned max_abs = 0;  // format bits of the largest finite |x|
};

// Bit layout of each format: where the exponent saturates, where subnormals end, and how
// to read a poison id.
struct F32Format {
  static constexpr unsigned kBytes = 4;
  static constexpr unsigned kAbsMask = 0x7FFFFFFFu, kInf = 0x7F800000u, kMinNormal = 0x00800000u, kSign = 0x80000000u;
  __device__ static int poison(unsigned bits) { return poison_payload(bits, kF32PoisonSignature, kF32PoisonMask); }
  __device__ static float to_float(unsigned abs_bits) { return __uint_as_float(abs_bits); }
};
struct F16Format {
  static constexpr unsigned kBytes = 2;
  static constexpr unsigned kAbsMask = 0x7FFFu, kInf = 0x7C00u, kMinNormal = 0x0400u, kSign = 0x8000u;
  __device__ static int poison(unsigned bits) { return poison_payload(bits, kF16PoisonSignature, kF16PoisonMask); }
  __device__ static float to_float(unsigned abs_bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(abs_bits)));
  }
};
struct BF16Format {
  static constexpr unsigned kBytes = 2;
  static constexpr unsigned kAbsMask = 0x7FFFu, kInf = 0x7F80u, kMinNormal = 0x0080u, kSign = 0x8000u;
  __device__ static int poison(unsigned bits) { return poison_payload(bits, kBF16PoisonSignature, kBF16PoisonMask); }
  __device__ static float to_float(unsigned abs_bits) { return __uint_as_float(abs_bits << 16); }
};

// The format of an element type, and its raw bits.
template <class T> struct FormatOf;
template <> struct FormatOf<float> { using type = F32Format; };
template <> struct FormatOf<__half> { using type = F16Format; };
template <> struct FormatOf<__nv_bfloat16> { using type = BF16Format; };
__device__ __forceinline__ unsigned bits_of(float x) { return __float_as_uint(x); }
__device__ __forceinline__ unsigned bits_of(__half x) { return __half_as_ushort(x); }
__device__ __forceinline__ unsigned bits_of(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }

template <class Format>
__device__ __forceinline__ void visit(unsigned bits, u64 offset, int own_id, LocalFlags& f) {
  const unsigned abs = bits & Format::kAbsMask;
  if (abs < Format::kInf) {  // finite: the hot path
    f.max_abs = max(f.max_abs, abs);
    f.subnormal += (abs - 1u) < (Format::kMinNormal - 1u);  // 0 < abs < min normal
    return;
  }
  if (abs == Format::kInf) {
    if (bits & Format::kSign) ++f.neg_inf; else ++f.pos_inf;
    f.first_inf = min(f.first_inf, offset);
    return;
  }
  const int id = Format::poison(bits);
  if (id != 0 && id == own_id) {
    ++f.unwritten;
    f.first_unwritten = min(f.first_unwritten, offset);
    return;
  }
  ++f.nan;
  f.first_nan = min(f.first_nan, offset);
  if (id != 0) {
    ++f.foreign;
    f.first_foreign = min(f.first_foreign, (offset << 8) | static_cast<u64>(id));
  }
}

__device__ __forceinline__ u64 warp_sum(u64 x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
  return x;
}
__device__ __forceinline__ u64 warp_min(u64 x) {
  for (int o = 16; o > 0; o >>= 1) x = min(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
  return x;
}
__device__ __forceinline__ unsigned warp_max(unsigned x) {
  for (int o = 16; o > 0; o >>= 1) x = max(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
  return x;
}

// Warp, then block reduction of every thread's flags into *out: one atomic per non-trivial
// field per block, and the largest |x| only when it beats what *out holds already (so a
// clean tensor costs a block one read, not one atomic per field). Every thread of the block
// calls it (it synchronizes); blocks of at most 1024 threads, a whole number of warps.
template <class Format>
__device__ void flush_block(const LocalFlags& f, FlagCounts* out) {
  constexpr int kMaxWarps = 32;
  __shared__ u64 sums[6][kMaxWarps];
  __shared__ u64 mins[4][kMaxWarps];
  __shared__ unsigned maxes[kMaxWarps];
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int warps = static_cast<int>(blockDim.x * blockDim.y * blockDim.z) / 32;
  const int lane = thread % 32, warp = thread / 32;
  u64 s[6] = {f.nan, f.pos_inf, f.neg_inf, f.subnormal, f.unwritten, f.foreign};
  u64 m[4] = {f.first_nan, f.first_inf, f.first_unwritten, f.first_foreign};
#pragma unroll
  for (int k = 0; k < 6; ++k) s[k] = warp_sum(s[k]);
#pragma unroll
  for (int k = 0; k < 4; ++k) m[k] = warp_min(m[k]);
  const unsigned mx = warp_max(f.max_abs);
  if (lane == 0) {
    for (int k = 0; k < 6; ++k) sums[k][warp] = s[k];
    for (int k = 0; k < 4; ++k) mins[k][warp] = m[k];
    maxes[warp] = mx;
  }
  __syncthreads();
  if (thread == 0) {
    u64* counters[6] = {&out->nan, &out->pos_inf, &out->neg_inf, &out->subnormal, &out->unwritten, &out->foreign_poison};
    u64* firsts[4] = {&out->first_nan, &out->first_inf, &out->first_unwritten, &out->first_foreign};
    for (int k = 0; k < 6; ++k) {
      u64 total = 0;
      for (int w = 0; w < warps; ++w) total += sums[k][w];
      if (total) atomicAdd(counters[k], total);
    }
    for (int k = 0; k < 4; ++k) {
      u64 first = kNoIndex;
      for (int w = 0; w < warps; ++w) first = min(first, mins[k][w]);
      if (first != kNoIndex) atomicMin(firsts[k], first);
    }
    unsigned block_max = 0;
    for (int w = 0; w < warps; ++w) block_max = max(block_max, maxes[w]);
    if (block_max) {
      const unsigned bits = __float_as_uint(Format::to_float(block_max));
      if (bits > *reinterpret_cast<volatile unsigned*>(&out->max_abs_bits)) atomicMax(&out->max_abs_bits, bits);
    }
  }
  __syncthreads();  // the shared arrays are free for the next flush
}

// A NaN, Inf or poison element, straight into the slot: the rare path of FlagTap, a few
// atomics and no local state (registers are what the kernels it is folded into run short of).
template <class Format>
__device__ __forceinline__ void record_special(const FlagSlot& slot, unsigned bits, u64 offset) {
  FlagCounts* out = slot.counts;
  const u64 at = slot.index_base + offset;
  if ((bits & Format::kAbsMask) == Format::kInf) {
    atomicAdd(bits & Format::kSign ? &out->neg_inf : &out->pos_inf, 1ull);
    atomicMin(&out->first_inf, at);
    return;
  }
  const int id = Format::poison(bits);
  if (id != 0 && id == slot.own_id) {
    atomicAdd(&out->unwritten, 1ull);
    atomicMin(&out->first_unwritten, at);
    return;
  }
  atomicAdd(&out->nan, 1ull);
  atomicMin(&out->first_nan, at);
  if (id != 0) {
    atomicAdd(&out->foreign_poison, 1ull);
    atomicMin(&out->first_foreign, (at << 8) | static_cast<u64>(id));
  }
}

}  // namespace flag_device

// One thread's share of a capture's flags, in an implementation's kernel: add() every element
// of the captured view the thread reads or stores, with its offset in the view's storage;
// flush() once at the end, from every thread of the block. A finite element costs two
// registers (the largest |x|, the subnormal count); NaN, Inf and poison go to the slot at
// once (record_special). The slot is passed to each call, not held, so that it stays a kernel
// parameter rather than five registers. kOn false compiles to nothing (a kernel's untraced
// instantiation); an empty slot does nothing either: the tap runs its own pass.
//
// NegativeInfinity::common is for a tensor that holds -inf by design: what a mask writes into
// scores. There the two atomics an element (count, first index) queue on the slot's one address
// (a causal B16 H16 S4096 run's scores hold 2^31 of them: a traced run took 44x its untraced
// time on the H100). The thread counts them and keeps the first offset (below 2^32; a later
// one goes to the slot at once), and flush() adds a block's share: two registers more. +inf
// (an overflow) still goes to the slot at once. The counts are the same either way.
enum class NegativeInfinity { rare, common };

template <class T, bool kOn = true, NegativeInfinity kNegativeInfinity = NegativeInfinity::rare>
class FlagTap {
 public:
  using Format = typename flag_device::FormatOf<T>::type;
  __device__ void add(const FlagSlot& slot, T value, unsigned long long offset) {
    if (!kOn || slot.counts == nullptr) return;
    const unsigned bits = flag_device::bits_of(value), abs = bits & Format::kAbsMask;
    if (abs < Format::kInf) {
      max_abs_ = max(max_abs_, abs);
      subnormal_ += (abs - 1u) < (Format::kMinNormal - 1u);  // 0 < abs < min normal
      return;
    }
    if constexpr (kNegativeInfinity == NegativeInfinity::common) {
      if (bits == (Format::kInf | Format::kSign) && offset < kNoOffset) {
        ++neg_inf_;
        first_neg_inf_ = min(first_neg_inf_, static_cast<unsigned>(offset));
        return;
      }
    }
    flag_device::record_special<Format>(slot, bits, offset);
  }

  // kN consecutive elements at once: the finite case decided for all of them together, the
  // rare case (a NaN, Inf or poison among them) element by element.
  template <int kN>
  __device__ void add(const FlagSlot& slot, const T (&values)[kN], unsigned long long offset) {
    if (!kOn || slot.counts == nullptr) return;
    unsigned top = 0, subnormal = 0;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const unsigned abs = flag_device::bits_of(values[k]) & Format::kAbsMask;
      top = max(top, abs);
      subnormal += (abs - 1u) < (Format::kMinNormal - 1u);
    }
    if (top < Format::kInf) {
      max_abs_ = max(max_abs_, top);
      subnormal_ += subnormal;
      return;
    }
    for (int k = 0; k < kN; ++k) add(slot, values[k], offset + k);
  }

  // Block-wide: a warp reduction, then one thread of the block adds the block's share to the
  // slot (the slot is one address per field: an atomic per warp would queue on it). Blocks of
  // at most 1024 threads, a whole number of warps, as for flush_block.
  __device__ void flush(const FlagSlot& slot) {
    if (!kOn || slot.counts == nullptr) return;
    constexpr int kMaxWarps = 32;
    __shared__ unsigned tops[kMaxWarps];
    __shared__ flag_device::u64 subnormals[kMaxWarps];
    const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int warps = static_cast<int>(blockDim.x * blockDim.y * blockDim.z) / 32;
    const unsigned top = flag_device::warp_max(max_abs_);
    const flag_device::u64 subnormal = flag_device::warp_sum(static_cast<flag_device::u64>(subnormal_));
    if (thread % 32 == 0) {
      tops[thread / 32] = top;
      subnormals[thread / 32] = subnormal;
    }
    if constexpr (kNegativeInfinity == NegativeInfinity::common) flush_negative_infinities(slot, thread, warps);
    __syncthreads();
    if (thread == 0) {
      unsigned block_top = 0;
      flag_device::u64 block_subnormal = 0;
      for (int w = 0; w < warps; ++w) {
        block_top = max(block_top, tops[w]);
        block_subnormal += subnormals[w];
      }
      if (block_subnormal) atomicAdd(&slot.counts->subnormal, block_subnormal);
      if (block_top) {
        const unsigned top_bits = __float_as_uint(Format::to_float(block_top));
        if (top_bits > *reinterpret_cast<volatile unsigned*>(&slot.counts->max_abs_bits)) {
          atomicMax(&slot.counts->max_abs_bits, top_bits);
        }
      }
    }
    __syncthreads();  // the shared arrays are free for the next tap's flush
  }

 private:
  // The block's -inf into the slot, a warp reduction and one thread's atomics; the caller's
  // __syncthreads() after it frees the shared arrays.
  __device__ void flush_negative_infinities(const FlagSlot& slot, int thread, int warps) {
    constexpr int kMaxWarps = 32;
    __shared__ flag_device::u64 counts[kMaxWarps];
    __shared__ unsigned firsts[kMaxWarps];
    const flag_device::u64 count = flag_device::warp_sum(neg_inf_);
    const unsigned first = static_cast<unsigned>(flag_device::warp_min(first_neg_inf_));
    if (thread % 32 == 0) {
      counts[thread / 32] = count;
      firsts[thread / 32] = first;
    }
    __syncthreads();
    if (thread != 0) return;
    flag_device::u64 block_count = 0;
    unsigned block_first = kNoOffset;
    for (int w = 0; w < warps; ++w) {
      block_count += counts[w];
      block_first = min(block_first, firsts[w]);
    }
    if (block_count) atomicAdd(&slot.counts->neg_inf, block_count);
    if (block_first != kNoOffset) atomicMin(&slot.counts->first_inf, slot.index_base + block_first);
  }

  static constexpr unsigned kNoOffset = ~0u;
  unsigned max_abs_ = 0;  // format bits
  unsigned subnormal_ = 0;
  // NegativeInfinity::common only (unused, and so compiled away, otherwise). Per thread: a
  // thread visits far fewer than 2^32 elements of one capture.
  unsigned neg_inf_ = 0;
  unsigned first_neg_inf_ = kNoOffset;  // offset in the view, before the slot's base
};

}  // namespace fc

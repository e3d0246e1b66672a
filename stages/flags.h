#pragma once
// What the flag kernel finds in one stage tensor, in one pass, and the poison patterns it
// recognises. The same struct is filled on the device (stages/flags_device.cuh) and on the
// host (host_flags), which is also the oracle of the GPU tests.
//
// Poison: before a run every output and workspace buffer is filled with a quiet NaN whose
// payload carries a signature and the buffer's id (1..62). An element still holding its
// own buffer's pattern was never written (unwritten-output); another buffer's pattern was
// copied from memory nobody wrote (uninitialized-read, naming that buffer). Arithmetic on a
// NaN gives the canonical NaN on NVIDIA GPUs, so only copies carry a payload through.
#include <cstdint>
#include <functional>

#include "core/host_device.h"
#include "stages/tensor_view.h"

namespace fc {

inline constexpr int kMaxPoisonId = 62;

// Signatures: high payload bits that no arithmetic produces (NVIDIA's canonical NaNs are
// 0x7FFFFFFF and 0x7FFF, x86's 0x7FC00000 and its fp16/bf16 conversions 0x7E00, 0x7FC0).
// The bits outside the mask carry the buffer id.
inline constexpr std::uint32_t kF32PoisonSignature = 0x7FDA5E00u, kF32PoisonMask = 0xFFFFFF00u;
inline constexpr std::uint32_t kF16PoisonSignature = 0x7F00u, kF16PoisonMask = 0xFF00u;
inline constexpr std::uint32_t kBF16PoisonSignature = 0x7FC0u, kBF16PoisonMask = 0xFFC0u;
// Shared memory's poison, before each run of a GPU implementation: a NaN read as fp32, or as
// either half as fp16 or bf16, and no buffer's pattern in any of them.
inline constexpr std::uint32_t kSharedMemoryPoison = 0x7FA57FA5u;

// The buffer id `bits` carries under one format's signature and mask, or 0 when `bits` is
// not a poison pattern: the one decoding the host flags and the flag kernel share.
FC_HOST_DEVICE constexpr int poison_payload(std::uint32_t bits, std::uint32_t signature, std::uint32_t mask) {
  const std::uint32_t id = (bits & mask) == signature ? bits & ~mask : 0u;
  return id >= 1 && id <= static_cast<std::uint32_t>(kMaxPoisonId) ? static_cast<int>(id) : 0;
}
inline constexpr unsigned long long kNoIndex = ~0ull;

struct FlagCounts {
  unsigned long long nan = 0;             // NaN elements other than this buffer's own poison
  unsigned long long pos_inf = 0, neg_inf = 0;
  unsigned long long subnormal = 0;       // in the tensor's own format
  unsigned long long unwritten = 0;       // this buffer's own poison
  unsigned long long foreign_poison = 0;  // another buffer's poison (counted in nan too)
  unsigned long long first_nan = kNoIndex, first_inf = kNoIndex, first_unwritten = kNoIndex;
  unsigned long long first_foreign = kNoIndex;  // (storage offset << 8) | source id
  unsigned int max_abs_bits = 0;                 // bits of the largest finite |x|, as fp32
  unsigned int pad = 0;

  float max_abs() const;
  int foreign_source() const { return first_foreign == kNoIndex ? 0 : static_cast<int>(first_foreign & 0xFF); }
  unsigned long long first_foreign_offset() const { return first_foreign == kNoIndex ? kNoIndex : first_foreign >> 8; }
  bool clean() const { return nan == 0 && pos_inf == 0 && neg_inf == 0 && unwritten == 0; }
};

// The flag pass reads any id 1..kMaxPoisonId from a pattern; a run has fewer buffers. A
// tensor whose first foreign pattern names none of the run's `buffers` ids (names[0] is no
// buffer) holds a NaN a kernel made with those bits, not a copy of a buffer's poison: its
// foreign count is dropped, the elements stay counted as NaN.
void forget_unknown_poison(FlagCounts& f, std::size_t buffers);

// Reads every poison pattern of a tensor as the plain NaN it is: for values that never were in
// a poisoned buffer (read from a file), whose NaNs may carry any payload.
void forget_poison(FlagCounts& f);

// Raw bits of the poison pattern of buffer `id` in a 16- or 32-bit format.
std::uint32_t poison_bits(DType dtype, int id);
// The buffer id whose poison `bits` is, or 0 when `bits` is not a poison pattern.
int poison_id(DType dtype, std::uint32_t bits);

// Flags of a host tensor; first indices are storage offsets from view.data. With `counted`,
// only the elements at the storage offsets it accepts.
FlagCounts host_flags(const TensorView& view);
FlagCounts host_flags(const TensorView& view, const std::function<bool(std::int64_t)>& counted);
// Folds the flags of one block of a tensor into the tensor's: counts add, the largest |x| is
// the larger, first indices (the block's plus index_base) the smaller.
void merge_flags(FlagCounts& into, const FlagCounts& block, unsigned long long index_base);

}  // namespace fc

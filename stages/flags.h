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

#include "stages/tensor_view.h"

namespace fc {

inline constexpr int kMaxPoisonId = 62;
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

// Raw bits of the poison pattern of buffer `id` in a 16- or 32-bit format.
std::uint32_t poison_bits(DType dtype, int id);
// The buffer id whose poison `bits` is, or 0 when `bits` is not a poison pattern.
int poison_id(DType dtype, std::uint32_t bits);

// Flags of a host tensor; first indices are storage offsets from view.data.
FlagCounts host_flags(const TensorView& view);

}  // namespace fc

#include "stages/flags.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/numeric.h"

namespace fc {
namespace {
// Signatures: high payload bits that no arithmetic produces (NVIDIA's canonical NaNs are
// 0x7FFFFFFF and 0x7FFF, x86's 0x7FC00000 and its fp16/bf16 conversions 0x7E00, 0x7FC0).
constexpr std::uint32_t kF32Signature = 0x7FDA5E00u, kF32Mask = 0xFFFFFF00u;
constexpr std::uint32_t kF16Signature = 0x7F00u, kF16Mask = 0xFF00u;
constexpr std::uint32_t kBF16Signature = 0x7FC0u, kBF16Mask = 0xFFC0u;

bool valid_id(int id) { return id >= 1 && id <= kMaxPoisonId; }
}  // namespace

float FlagCounts::max_abs() const {
  float f;
  std::memcpy(&f, &max_abs_bits, sizeof f);
  return f;
}

std::uint32_t poison_bits(DType dtype, int id) {
  if (!valid_id(id)) throw Error("poison id " + std::to_string(id) + " outside 1.." + std::to_string(kMaxPoisonId));
  const auto payload = static_cast<std::uint32_t>(id);
  switch (dtype) {
    case DType::f32: return kF32Signature | payload;
    case DType::f16: return kF16Signature | payload;
    case DType::bf16: return kBF16Signature | payload;
    default: throw Error(std::string("no poison pattern for ") + dtype_name(dtype));
  }
}

int poison_id(DType dtype, std::uint32_t bits) {
  int id = 0;
  switch (dtype) {
    case DType::f32: id = (bits & kF32Mask) == kF32Signature ? static_cast<int>(bits & 0xFF) : 0; break;
    case DType::f16: id = (bits & kF16Mask) == kF16Signature ? static_cast<int>(bits & 0xFF) : 0; break;
    case DType::bf16: id = (bits & kBF16Mask) == kBF16Signature ? static_cast<int>(bits & 0x3F) : 0; break;
    default: return 0;
  }
  return valid_id(id) ? id : 0;
}

FlagCounts host_flags(const TensorView& view) {
  if (view.on_device) throw Error("host_flags: the tensor is in device memory");
  FlagCounts f;
  const std::int64_t n = view.numel();
  const std::size_t width = dtype_size(view.dtype);
  const auto* bytes = static_cast<const unsigned char*>(view.data);
  float max_abs = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t bits = 0;
    double x = 0;
    if (width == 4) {
      float v;
      std::memcpy(&v, bytes + i * 4, 4);
      std::memcpy(&bits, &v, 4);
      x = v;
    } else {
      std::uint16_t b;
      std::memcpy(&b, bytes + i * 2, 2);
      bits = b;
      x = view.dtype == DType::f16 ? f16_bits_to_float(b) : bf16_bits_to_float(b);
    }
    const auto at = static_cast<unsigned long long>(i);
    if (std::isnan(x)) {
      const int id = poison_id(view.dtype, bits);
      if (id != 0 && id == view.buffer_id) {
        if (f.unwritten++ == 0) f.first_unwritten = at;
        continue;
      }
      if (f.nan++ == 0) f.first_nan = at;
      if (id != 0 && f.foreign_poison++ == 0) f.first_foreign = (at << 8) | static_cast<unsigned>(id);
    } else if (std::isinf(x)) {
      if (x > 0) ++f.pos_inf; else ++f.neg_inf;
      if (f.first_inf == kNoIndex) f.first_inf = at;
    } else {
      max_abs = std::max(max_abs, static_cast<float>(std::fabs(x)));
      if (is_subnormal(view.dtype, x)) ++f.subnormal;
    }
  }
  std::memcpy(&f.max_abs_bits, &max_abs, 4);
  return f;
}

}  // namespace fc

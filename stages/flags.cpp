#include "stages/flags.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/numeric.h"

namespace fc {
float FlagCounts::max_abs() const {
  float f;
  std::memcpy(&f, &max_abs_bits, sizeof f);
  return f;
}

std::uint32_t poison_bits(DType dtype, int id) {
  if (id < 1 || id > kMaxPoisonId) throw Error("poison id " + std::to_string(id) + " outside 1.." + std::to_string(kMaxPoisonId));
  const auto payload = static_cast<std::uint32_t>(id);
  switch (dtype) {
    case DType::f32: return kF32PoisonSignature | payload;
    case DType::f16: return kF16PoisonSignature | payload;
    case DType::bf16: return kBF16PoisonSignature | payload;
    default: throw Error(std::string("no poison pattern for ") + dtype_name(dtype));
  }
}

int poison_id(DType dtype, std::uint32_t bits) {
  switch (dtype) {
    case DType::f32: return poison_payload(bits, kF32PoisonSignature, kF32PoisonMask);
    case DType::f16: return poison_payload(bits, kF16PoisonSignature, kF16PoisonMask);
    case DType::bf16: return poison_payload(bits, kBF16PoisonSignature, kBF16PoisonMask);
    default: return 0;
  }
}

FlagCounts host_flags(const TensorView& view) { return host_flags(view, nullptr); }

FlagCounts host_flags(const TensorView& view, const std::function<bool(std::int64_t)>& counted) {
  if (view.on_device) throw Error("host_flags: the tensor is in device memory");
  FlagCounts f;
  const std::int64_t n = view.numel();
  const std::size_t width = dtype_size(view.dtype);
  const auto* bytes = static_cast<const unsigned char*>(view.data);
  float max_abs = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (counted && !counted(i)) continue;
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

void forget_unknown_poison(FlagCounts& f, std::size_t buffers) {
  if (f.foreign_poison == 0 || static_cast<std::size_t>(f.foreign_source()) < buffers) return;
  f.foreign_poison = 0;
  f.first_foreign = kNoIndex;
}

void forget_poison(FlagCounts& f) {
  f.nan += f.unwritten;
  f.first_nan = std::min(f.first_nan, f.first_unwritten);
  f.unwritten = 0;
  f.first_unwritten = kNoIndex;
  f.foreign_poison = 0;
  f.first_foreign = kNoIndex;
}

void merge_flags(FlagCounts& into, const FlagCounts& block, unsigned long long index_base) {
  into.nan += block.nan;
  into.pos_inf += block.pos_inf;
  into.neg_inf += block.neg_inf;
  into.subnormal += block.subnormal;
  into.unwritten += block.unwritten;
  into.foreign_poison += block.foreign_poison;
  auto first = [index_base](unsigned long long current, unsigned long long offset) {
    return offset == kNoIndex ? current : std::min(current, index_base + offset);
  };
  into.first_nan = first(into.first_nan, block.first_nan);
  into.first_inf = first(into.first_inf, block.first_inf);
  into.first_unwritten = first(into.first_unwritten, block.first_unwritten);
  if (block.first_foreign != kNoIndex) {
    into.first_foreign = std::min(into.first_foreign, ((index_base + (block.first_foreign >> 8)) << 8) |
                                                          (block.first_foreign & 0xFF));
  }
  into.max_abs_bits = std::max(into.max_abs_bits, block.max_abs_bits);
}

}  // namespace fc

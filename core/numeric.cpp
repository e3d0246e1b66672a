#include "core/numeric.h"

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace fc {

float f16_bits_to_float(std::uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}
std::uint16_t float_to_f16_bits(float x) {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(x));
}
float bf16_bits_to_float(std::uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}
std::uint16_t float_to_bf16_bits(float x) {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(x));
}

double round_to(DType t, double x) {
  switch (t) {
    case DType::f16: return f16_bits_to_float(float_to_f16_bits(static_cast<float>(x)));
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x)));
    case DType::f32: return static_cast<float>(x);
    case DType::f64: return x;
    default: throw Error(std::string("cannot round to ") + dtype_name(t));
  }
}

namespace {
// Maps the bit pattern of a finite value onto integers that are consecutive for
// consecutive representable values (negative values mirrored below zero).
std::int64_t ordered(std::int64_t magnitude_bits, bool negative) {
  return negative ? -magnitude_bits : magnitude_bits;
}

std::int64_t ordered_bits(DType t, double x) {
  switch (t) {
    case DType::f16: {
      std::uint16_t b = float_to_f16_bits(static_cast<float>(x));
      return ordered(b & 0x7FFF, (b & 0x8000) != 0);
    }
    case DType::bf16: {
      std::uint16_t b = float_to_bf16_bits(static_cast<float>(x));
      return ordered(b & 0x7FFF, (b & 0x8000) != 0);
    }
    case DType::f32: {
      float f = static_cast<float>(x);
      std::uint32_t b;
      std::memcpy(&b, &f, sizeof b);
      return ordered(b & 0x7FFFFFFFu, (b & 0x80000000u) != 0);
    }
    case DType::f64: {
      std::uint64_t b;
      std::memcpy(&b, &x, sizeof b);
      return ordered(static_cast<std::int64_t>(b & 0x7FFFFFFFFFFFFFFFull), (b >> 63) != 0);
    }
    default: throw Error(std::string("no ULPs for ") + dtype_name(t));
  }
}
}  // namespace

std::int64_t ulp_distance(DType t, double a, double b) {
  double ra = round_to(t, a), rb = round_to(t, b);
  if (!std::isfinite(ra) || !std::isfinite(rb)) {
    return (ra == rb) ? 0 : std::numeric_limits<std::int64_t>::max();
  }
  std::int64_t d = ordered_bits(t, ra) - ordered_bits(t, rb);
  return d < 0 ? -d : d;
}

bool is_subnormal(DType t, double x) {
  if (!is_floating(t) || x == 0 || !std::isfinite(x)) return false;
  double min_normal = 0;
  switch (t) {
    case DType::f16: min_normal = std::ldexp(1.0, -14); break;
    case DType::bf16: case DType::f32: min_normal = std::ldexp(1.0, -126); break;
    default: min_normal = std::numeric_limits<double>::min(); break;
  }
  return std::fabs(x) < min_normal;
}

bool overflows(DType t, double x) { return std::isfinite(x) && std::isinf(round_to(t, x)); }

std::string number_text(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}

}  // namespace fc

#include "reference/stage_terms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/numeric.h"

namespace fc {
namespace {

// Rounding to format t near zero: at most half its smallest subnormal, absolute. Like every
// rounding term it carries the safety factor.
double eta(DType t) { return kSafetyFactor * min_subnormal(t) / 2; }

// Unit roundoff of one addition of the stage's matmul accumulation (fp32 unless declared).
double accumulation_unit(const Arithmetic& a) {
  const double u = unit_roundoff(a.accumulate);
  return a.tensor_cores ? 2 * u : u;
}

// Absolute floor of one accumulation step: 2^-126 in fp32; a narrower accumulator may flush
// below its smallest normal number.
double accumulation_floor(const Arithmetic& a) {
  return a.accumulate == DType::f32 ? stage_math::kAccEta : std::max(stage_math::kAccEta, min_normal(a.accumulate));
}

stage_math::Accumulation accumulation_of(const Arithmetic& a) { return {unit_roundoff(a.accumulate), a.tensor_cores}; }

double from_bits(std::uint64_t bits) {
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace

stage_math::OutputTerms output_terms(const Arithmetic& a) { return {unit_roundoff(a.out), eta(a.out), eta(DType::f32)}; }

stage_math::QkTerms qk_terms(const Arithmetic& a, std::int64_t head_dim, double scale, double softcap) {
  const double d = static_cast<double>(head_dim);
  stage_math::QkTerms k;
  k.softcap = softcap;
  k.u_out = unit_roundoff(a.out);
  k.u_acc = accumulation_unit(a);
  k.products = d + 1;
  k.underflow = (d + 1) * accumulation_floor(a) * std::max(1.0, scale);
  k.eta_out = eta(a.out);
  k.overflow = overflow_threshold(a.out);
  k.accumulation = accumulation_of(a);
  return k;
}

stage_math::PvTerms pv_terms(const Arithmetic& a, DType p_format, std::int64_t keys) {
  stage_math::PvTerms k;
  k.keys = static_cast<double>(keys);
  k.u_acc = accumulation_unit(a);
  k.u_out = unit_roundoff(a.out);
  // Operand rounding inside the stage happens only when the operand format is narrower than p's.
  const double u_op = unit_roundoff(a.operand);
  k.u_operand = u_op > unit_roundoff(p_format) ? u_op : 0.0;
  // Rounding p to a narrow operand loses up to half its smallest subnormal per element.
  k.eta_operand = k.u_operand > 0 ? eta(a.operand) : 0.0;
  k.underflow = k.keys * accumulation_floor(a);
  k.eta_out = eta(a.out);
  k.accumulation = accumulation_of(a);
  return k;
}

stage_math::RangeTerms range_terms(const Arithmetic& pv, DType out, std::int64_t keys) {
  stage_math::RangeTerms k;
  k.keys = static_cast<double>(keys);
  k.u_acc = accumulation_unit(pv);
  k.u_operand = unit_roundoff(pv.operand);
  k.eta_operand = eta(pv.operand);
  k.underflow = k.keys * accumulation_floor(pv);
  k.u_out = std::max(unit_roundoff(out), unit_roundoff(pv.out));
  k.eta_out = eta(out);
  return k;
}

double nominal_floor(const Arithmetic& a) { return a.tensor_cores ? min_normal(a.operand) : 0.0; }

double overflow_threshold(DType t) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!std::isinf(round_to(t, std::numeric_limits<double>::max()))) return kInf;
  // Rounding is monotone: bisect the bit patterns of positive doubles (ordered like their values).
  std::uint64_t finite = 0, overflowing = 0x7ff0000000000000ULL;
  while (overflowing - finite > 1) {
    const std::uint64_t mid = finite + (overflowing - finite) / 2;
    (std::isinf(round_to(t, from_bits(mid))) ? overflowing : finite) = mid;
  }
  return from_bits(overflowing);
}

}  // namespace fc

#pragma once
// Conversions between the storage formats and double, with the rounding a kernel does
// (round to nearest even), and the ULP distance used in reports.
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace fc {

float f16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_f16_bits(float x);
float bf16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16_bits(float x);

// x rounded to the format t (fp16 and bf16 through fp32, as a kernel converts).
double round_to(DType t, double x);

// Number of representable values of format t strictly between a and b plus one, after
// rounding both to t; 0 when they round to the same value. NaN/Inf give INT64_MAX.
std::int64_t ulp_distance(DType t, double a, double b);

bool is_subnormal(DType t, double x);

// x with 6 significant digits, as the reports print values ("4.04041e-07").
std::string number_text(double x);

// A finite x that format t stores as Inf (fp16: |x| >= 65520).
bool overflows(DType t, double x);

// exp(x) is +Inf in fp32 for x above this: ln of the largest fp32.
constexpr double kFp32ExpOverflow = 88.72283905206835;

}  // namespace fc

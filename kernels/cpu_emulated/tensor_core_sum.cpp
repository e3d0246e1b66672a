#include "kernels/cpu_emulated/tensor_core_sum.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fc::emu {
namespace {
constexpr int kAlignmentBits = 2;  // bits kept below the accumulator's last place when aligning
constexpr int kFp32Digits = 24;
constexpr int kFp32MinExponent = -126;
constexpr int kNoExponent = std::numeric_limits<int>::min();

// x cut toward zero to a multiple of 2^exponent.
double cut(double x, int exponent) { return std::ldexp(std::trunc(std::ldexp(x, -exponent)), exponent); }
}  // namespace

TensorCoreSum::TensorCoreSum(DType operand) : min_exponent_(std::ilogb(min_normal(operand))) {}

void TensorCoreSum::add(double a, double b) {
  const double t = a * b;
  if (!std::isfinite(t)) {
    special_ += t;
    return;
  }
  // A zero product holds its place in the block but takes no part in the alignment.
  terms_[count_] = t;
  exponents_[count_] = t == 0 ? kNoExponent : std::max(std::ilogb(a), min_exponent_) + std::max(std::ilogb(b), min_exponent_);
  if (++count_ == kBlock) flush();
}

void TensorCoreSum::flush() {
  const int n = count_;
  count_ = 0;
  int top = sum_ != 0 ? std::ilogb(sum_) : kNoExponent;
  for (int i = 0; i < n; ++i) top = std::max(top, exponents_[i]);
  if (top == kNoExponent) return;  // nothing but zeros
  const int grid = top - (kFp32Digits - 1) - kAlignmentBits;
  double total = cut(sum_, grid);  // every cut term is an integer multiple of 2^grid: exact in double
  for (int i = 0; i < n; ++i) total += cut(terms_[i], grid);
  if (total != 0) total = cut(total, std::max(std::ilogb(total), kFp32MinExponent) - (kFp32Digits - 1));
  sum_ = total;
}

float TensorCoreSum::result() {
  flush();
  return static_cast<float>(sum_ + special_);
}

}  // namespace fc::emu

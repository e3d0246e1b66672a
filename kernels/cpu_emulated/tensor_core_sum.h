#pragma once
// The fp32 accumulation of an NVIDIA tensor core (HMMA), emulated bit for bit as measured on
// an H100 through cuBLASLt (docs/error-model.md, "Tensor cores"): products are exact; every
// block of 16 products and the running sum is aligned to the largest exponent among them,
// each term cut to 2 bits below the accumulator's last place (round toward zero), summed,
// and the result cut to 24 significant bits. A subnormal operand enters the alignment with
// its format's smallest normal exponent, as if it were normal: its products lose up to
// 2^-25 of that nominal size, not of their own.
#include <cstdint>

#include "core/dtype.h"

namespace fc::emu {

class TensorCoreSum {
 public:
  explicit TensorCoreSum(DType operand);
  // One product a*b; a and b must be exact in the operand format.
  void add(double a, double b);
  // The sum of every product added, in fp32.
  float result();

 private:
  static constexpr int kBlock = 16;
  void flush();

  int min_exponent_;  // exponent of the operand format's smallest normal number
  int count_ = 0;
  double terms_[kBlock] = {};
  int exponents_[kBlock] = {};
  double sum_ = 0;      // the running sum, a value of fp32
  double special_ = 0;  // Inf and NaN products, added as IEEE arithmetic would
};

}  // namespace fc::emu

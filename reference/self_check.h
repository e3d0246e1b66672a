#pragma once
// The reference checked against itself on one case, with no GPU: the blocked (online
// softmax) and split-KV chains must reproduce the full softmax to 1e-12 (relative to the
// output's size and the largest score's, whose FP64 rounding the lse carries), and every
// row's probabilities must sum to 1 (0 for a fully masked row).
#include <string>

#include "core/problem.h"

namespace fc {

struct SelfCheck {
  double blocked_deviation = 0;  // max |blocked - full| / (max(1, max |full|) max(1, max |score|)), over tile widths
  double split_deviation = 0;    // same for split-KV + combine
  double row_sum_deviation = 0;  // max |sum_j p_ij - 1| over attended rows
  std::int64_t masked_rows = 0;
  bool passed() const;
};

inline constexpr double kSelfCheckTolerance = 1e-12;

SelfCheck reference_self_check(const AttentionInputs& inputs);

}  // namespace fc

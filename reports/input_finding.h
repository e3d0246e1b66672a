#pragma once
// One thing a bug report's inputs say before any kernel runs (triage step 1).
#include <optional>
#include <string>

#include "reference/compare.h"

namespace fc {

struct InputFinding {
  std::string cause;           // input-nan, input-inf, fully-masked-rows, finite-bias-masked-rows,
                               // score-overflow-unscaled, score-overflow, exp-overflow-risk,
                               // lse-out-of-range, subnormal-inputs, conversion-overflow
  std::string tensor;          // q, k, v, mask or scores
  std::optional<Index4> index; // the first place (col -1 for a whole row)
  std::string detail;          // one sentence with the numbers
  bool defect = false;         // the inputs themselves are wrong (NaN, Inf, values lost)
};

}  // namespace fc

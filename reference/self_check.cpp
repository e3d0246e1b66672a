#include "reference/self_check.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/parallel.h"
#include "reference/attention.h"

namespace fc {

bool SelfCheck::passed() const {
  return blocked_deviation <= kSelfCheckTolerance && split_deviation <= kSelfCheckTolerance &&
         row_sum_deviation <= kSelfCheckTolerance;
}

SelfCheck reference_self_check(const AttentionInputs& inputs) {
  const Shape& s = inputs.problem.shape;
  const ChainArithmetic a = nominal_arithmetic(inputs.problem.dtype);
  SelfCheck result;
  std::mutex merge;
  parallel_for(s.batch * s.heads, [&](std::int64_t bh) {
    const HeadInputs in = head_inputs(inputs, bh / s.heads, bh % s.heads);
    const FullReference full = full_reference(in, a);
    // The chains agree to FP64 rounding of what they form: the output's size, and the
    // scores' (an lse of scores near -65504, a finite masking bias, carries 65504 * 2^-53).
    double largest_score = 1;
    for (Eigen::Index i = 0; i < full.scores.value.size(); ++i) {
      const double x = full.scores.value.data()[i];
      if (std::isfinite(x)) largest_score = std::max(largest_score, std::fabs(x));
    }
    const double scale = std::max(1.0, full.out.value.cwiseAbs().maxCoeff()) * largest_score;
    double blocked = 0, split = 0, row_sum = 0;
    std::int64_t masked = 0;
    for (std::int64_t width : {16L, 64L}) {
      const BlockedReference b = blocked_reference(in, 0, s.kv_len, width, a);
      blocked = std::max(blocked, (b.out.value - full.out.value).cwiseAbs().maxCoeff() / scale);
    }
    for (std::int64_t splits : {3L, 8L}) {
      const SplitReference sp = split_reference(in, splits, 32, a);
      split = std::max(split, (sp.out.value - full.out.value).cwiseAbs().maxCoeff() / scale);
    }
    for (Eigen::Index r = 0; r < full.softmax.p.value.rows(); ++r) {
      if (full.softmax.max.value(r, 0) == -INFINITY) {
        ++masked;
        row_sum = std::max(row_sum, full.softmax.p.value.row(r).cwiseAbs().sum());
      } else {
        row_sum = std::max(row_sum, std::fabs(full.softmax.p.value.row(r).sum() - 1.0));
      }
    }
    std::lock_guard<std::mutex> lock(merge);
    result.blocked_deviation = std::max(result.blocked_deviation, blocked);
    result.split_deviation = std::max(result.split_deviation, split);
    result.row_sum_deviation = std::max(result.row_sum_deviation, row_sum);
    result.masked_rows += masked;
  });
  return result;
}

}  // namespace fc

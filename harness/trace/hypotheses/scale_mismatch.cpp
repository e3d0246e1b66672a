// scale-mismatch: the bad elements are the reference times one constant (a tensor, or each
// row its own: a normalization or rescale missing, inverted or applied twice). The factor is
// fitted from the first bad element (of the tensor or the row) and named against the
// quantities a kernel multiplies by (named_factor).
#include <cmath>
#include <vector>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"

namespace fc {
namespace {

// The softmax denominator of a row of the head, sum_j exp(s_j - max_j s_j) over its keys
// (0 for a row with none).
double row_sum(const Diagnosis& d, Eigen::Index row) {
  const Eigen::RowVectorXd s = d.row_scores(row, d.head.k().rows(), true);
  const double m = s.maxCoeff();
  return std::isfinite(m) ? (s.array() - m).exp().sum() : 0.0;
}

// A per-row factor l_row / l_other: the row was normalized by a nearby row's softmax sum.
std::string other_row_sum(const Diagnosis& d, Eigen::Index row, double factor) {
  if (row < 0 || row >= d.head.q.rows()) return "";
  const double own = row_sum(d, row);
  for (Eigen::Index k = 1; k <= 8; ++k) {
    for (const Eigen::Index other : {row + k, row - k}) {
      if (other < 0 || other >= d.head.q.rows()) continue;
      const double l = row_sum(d, other);
      if (own > 0 && l > 0 && std::fabs(factor * l / own - 1) < 1e-3) {
        return " (its softmax sum over row " + std::to_string(other) + "'s: divided by the sum of row " +
               std::to_string(other) + ")";
      }
    }
  }
  return "";
}

}  // namespace

Explanation test_scale_mismatch(const Diagnosis& d) {
  Explanation best;
  // One factor for the tensor, then one per row. An element a factor is fitted on is evidence
  // only once another element confirms the factor: a factor per row of a quantity with one
  // element a row (a row's max, sum or lse) would explain any error at all.
  for (bool per_row : {false, true}) {
    std::size_t n = 0;
    double factor = 0;
    bool fitted = false;
    std::int64_t row = -1;
    bool fit_unconfirmed = false;
    std::vector<double> factors;
    for (const BadElement& e : d.bad) {
      // A zero is no scale: an output never written (a zeroed buffer) or a row taken as masked.
      if (!std::isfinite(e.kernel) || e.kernel == 0 || e.reference == 0 || !std::isfinite(e.reference)) continue;
      if (!fitted || (per_row && e.row != row)) {
        fitted = true;
        factor = e.kernel / e.reference;
        row = e.row;
        factors.push_back(factor);
        fit_unconfirmed = std::fabs(factor - 1) > 1e-3;
        continue;
      }
      if (std::fabs(factor - 1) > 1e-3 && d.explains_better(e, e.reference * factor)) {
        n += fit_unconfirmed ? 2 : 1;
        fit_unconfirmed = false;
      }
    }
    if (n == 0) continue;
    const double fraction = static_cast<double>(n) / static_cast<double>(d.bad.size());
    if (fraction <= best.explained) continue;
    const std::string what =
        per_row && factors.size() > 1
            ? "each row the reference times its own factor (row " + std::to_string(d.bad.front().row) + ": " +
                  number_text(factors.front()) +
                  (named_factor(d, factors.front()).empty() ? other_row_sum(d, d.bad.front().r, factors.front())
                                                       : named_factor(d, factors.front())) +
                  ")"
                                      : "the reference times " + number_text(factors.front()) + named_factor(d, factors.front());
    best = {"scale-mismatch", fraction,
            d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) + " is " + what +
                ": a scale or normalization missing, inverted or applied twice; " + explained_text(d, n)};
  }
  return best;
}

}  // namespace fc

// rescale-error: an online-softmax running state (the row sum, the accumulator, the rescaled
// accumulator) equals the reference with the rescale factor r = exp(m_prev - m_new) replaced
// by 1/r (inverted), 1 (omitted), r^2 (applied twice), 0 (the previous state dropped) or any
// other power of r, fitted on one element and confirmed by the others. The
// state after tile t is r S_{t-1} + C_t, so the kernel holds reference + (r' - r) S_{t-1};
// S_{t-1} is the kernel's own state after the previous tile (0 before the first, where the
// running max is -inf) and r comes from its captured running maxima.
#include <cmath>
#include <limits>
#include <optional>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"
#include "reference/matrix.h"

namespace fc {
namespace {

// The state quantity the previous tile left that this output continues.
std::optional<Quantity> previous_state(Quantity q) {
  switch (q) {
    case Quantity::row_sum: return Quantity::row_sum;
    case Quantity::acc:
    case Quantity::rescaled_acc: return Quantity::acc;
    default: return std::nullopt;
  }
}

struct Variant {
  const char* what;
  double (*factor)(double r);
};

// The power k with kernel = reference + (r^k - r) S_{t-1}, solved on the first bad element
// where r is neither 0 nor 1 and the previous state is not 0; none where k is 1 or not finite.
std::optional<double> fitted_power(const Diagnosis& d, const MatrixR& before, const MatrixR& max_before,
                                   const MatrixR& max_now) {
  for (const BadElement& e : d.bad) {
    const double m_prev = max_before(e.r, 0), m_new = max_now(e.r, 0);
    if (!std::isfinite(m_prev) || !std::isfinite(m_new) || m_prev == m_new) continue;
    const double previous = before.cols() == 1 ? before(e.r, 0) : before(e.r, e.c);
    if (previous == 0 || !std::isfinite(e.kernel) || !std::isfinite(e.reference)) continue;
    const double r = std::exp(m_prev - m_new), wrong = r + (e.kernel - e.reference) / previous;
    if (!(wrong > 0)) continue;  // no power of r: another element may fit
    const double k = std::log(wrong) / std::log(r);
    if (!std::isfinite(k) || std::fabs(k - 1) < 1e-3) continue;
    return k;
  }
  return std::nullopt;
}

}  // namespace

Explanation test_rescale_factor(const Diagnosis& d) {
  const int tile = d.result.tile, split = d.result.split;
  const std::optional<Quantity> state = previous_state(d.result.quantity);
  if (!state || tile < 0) return {};
  const std::optional<MatrixR> max_now = d.captured_head(Quantity::row_max, split, tile);
  if (!max_now || max_now->rows() != d.kernel.rows()) return {};
  // Before the first tile the state is 0 and the running max -inf (r = 0): a factor inverted
  // there is exp(+inf), and 0 times it NaN.
  const MatrixR zero_state = MatrixR::Zero(d.kernel.rows(), d.kernel.cols());
  const MatrixR no_max = MatrixR::Constant(d.kernel.rows(), 1, -std::numeric_limits<double>::infinity());
  const std::optional<MatrixR> before = tile > 0 ? d.captured_head(*state, split, tile - 1) : zero_state;
  const std::optional<MatrixR> max_before = tile > 0 ? d.captured_head(Quantity::row_max, split, tile - 1) : no_max;
  if (!before || !max_before || before->rows() != d.kernel.rows()) return {};
  const Variant variants[] = {{"inverted: exp(m_new - m_prev) instead of exp(m_prev - m_new)", [](double r) { return 1 / r; }},
                              {"omitted: the previous state carried over unscaled", [](double) { return 1.0; }},
                              {"applied twice", [](double r) { return r * r; }},
                              {"dropped: the previous state not carried at all", [](double) { return 0.0; }}};
  // A predicted NaN (0 times an inverted factor of exp(+inf)) is evidence only when every
  // element of every row with a key holds NaN, as that arithmetic gives: a few NaNs are not it.
  bool every_keyed_row_nan = true;
  for (Eigen::Index r = 0; r < d.kernel.rows() && every_keyed_row_nan; ++r) {
    if (!std::isfinite((*max_now)(r, 0))) continue;
    for (Eigen::Index c = 0; c < d.kernel.cols() && every_keyed_row_nan; ++c) every_keyed_row_nan = std::isnan(d.kernel(r, c));
  }
  Explanation best;
  const std::optional<double> power = fitted_power(d, *before, *max_before, *max_now);
  for (const Variant& v : variants) {
    std::size_t n = 0;
    for (const BadElement& e : d.bad) {
      const double m_prev = (*max_before)(e.r, 0), m_new = (*max_now)(e.r, 0);
      if (!std::isfinite(m_new)) continue;  // no key yet: the state stays 0 whatever the factor
      const double r = std::exp(m_prev - m_new), wrong = v.factor(r);
      if (wrong == r) continue;  // this variant changes nothing here: no evidence
      const double previous = before->cols() == 1 ? (*before)(e.r, 0) : (*before)(e.r, e.c);
      const double predicted = e.reference + (wrong - r) * previous;
      if (std::isnan(predicted) ? every_keyed_row_nan && std::isnan(e.kernel) : d.explains(e, predicted)) ++n;
    }
    const double fraction = static_cast<double>(n) / static_cast<double>(d.bad.size());
    if (n == 0 || fraction <= best.explained) continue;
    best = {"rescale-error", fraction,
            d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
                " equals the online softmax with the rescale of the previous state " + v.what + ": " + explained_text(d, n)};
  }
  // Any other power k of r, fitted on one element and confirmed by the others: 2^(m_prev - m_new)
  // (an exp2 without its log2(e)) is r^(ln 2).
  if (power) {
    std::size_t n = 0;
    for (const BadElement& e : d.bad) {
      const double m_prev = (*max_before)(e.r, 0), m_new = (*max_now)(e.r, 0);
      if (!std::isfinite(m_prev) || !std::isfinite(m_new)) continue;
      const double r = std::exp(m_prev - m_new);
      const double previous = before->cols() == 1 ? (*before)(e.r, 0) : (*before)(e.r, e.c);
      if (d.explains_better(e, e.reference + (std::pow(r, *power) - r) * previous)) ++n;
    }
    const double fraction = static_cast<double>(n) / static_cast<double>(d.bad.size());
    if (n > 1 && fraction > best.explained) {
      const bool exp2 = std::fabs(*power / std::log(2.0) - 1) < 1e-3, natural = std::fabs(*power * std::log(2.0) - 1) < 1e-3;
      best = {"rescale-error", fraction,
              d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
                  " equals the online softmax with the rescale of the previous state r^" + number_text(*power) +
                  " for r = exp(m_prev - m_new)" +
                  (exp2 ? " (2^(m_prev - m_new): exp2 without the log2(e) factor)"
                        : natural ? " (exp of a difference already in log2 units: exp where exp2 was meant)" : "") +
                  ": " + explained_text(d, n)};
    }
  }
  return best;
}

}  // namespace fc

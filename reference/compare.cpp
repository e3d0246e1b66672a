#include "reference/compare.h"

#include <cmath>
#include <limits>
#include <tuple>

#include "core/error.h"
#include "core/numeric.h"

namespace fc {

Index4 index_in(const Dims& dims, std::int64_t flat) {
  Index4 at;
  if (dims.size() == 3) {
    at.row = flat % dims[2];
    at.h = (flat / dims[2]) % dims[1];
    at.b = flat / (dims[2] * dims[1]);
  } else if (dims.size() == 4) {
    at.col = flat % dims[3];
    at.row = (flat / dims[3]) % dims[2];
    at.h = (flat / (dims[3] * dims[2])) % dims[1];
    at.b = flat / (dims[3] * dims[2] * dims[1]);
  }
  return at;
}

std::string at_text(const Index4& i) {
  std::string s = "b=" + std::to_string(i.b) + " h=" + std::to_string(i.h) + " row " + std::to_string(i.row);
  if (i.col >= 0) s += " col " + std::to_string(i.col);
  return s;
}

double normalized_error(double kernel, double reference, double bound) {
  if (std::isfinite(reference) && std::isfinite(kernel)) {
    const double err = std::fabs(kernel - reference);
    return err == 0 ? 0.0 : (bound > 0 ? err / bound : std::numeric_limits<double>::infinity());
  }
  const bool same = !std::isnan(reference) && kernel == reference;
  return same ? 0.0 : std::numeric_limits<double>::infinity();
}

Metrics compare_head(const HeadSpot& spot, const MatrixR& kernel, const Bounded& reference, DType kernel_format,
                     BoundChoice judged_by) {
  const MatrixR& ref = reference.value;
  if (kernel.rows() != ref.rows() || kernel.cols() != ref.cols()) {
    throw Error("compare: kernel tensor is " + std::to_string(kernel.rows()) + "x" + std::to_string(kernel.cols()) +
                ", reference " + std::to_string(ref.rows()) + "x" + std::to_string(ref.cols()));
  }
  const bool exact = reference.bound.size() == 0;  // Bounded::exact: every bound 0
  const bool has_tight = reference.tight.rows() == ref.rows() && reference.tight.cols() == ref.cols();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Metrics m;
  m.judged_by = judged_by;
  m.elements = kernel.size();
  for (Eigen::Index r = 0; r < ref.rows(); ++r) {
    for (Eigen::Index c = 0; c < ref.cols(); ++c) {
      const double k = kernel(r, c), x = ref(r, c), bound = exact ? 0.0 : reference.bound(r, c);
      const double tight = has_tight ? std::min(reference.tight(r, c), bound) : bound;
      if (std::isnan(k)) ++m.nan_kernel;
      if (k == kInf) ++m.posinf_kernel;
      if (k == -kInf) ++m.neginf_kernel;
      if (k == -kInf && x == -kInf) ++m.masked_neg_inf;
      if (std::isnan(x)) ++m.nan_reference;
      if (std::isinf(x)) ++m.inf_reference;

      if (std::isfinite(x) && std::isfinite(k)) {
        const double err = std::fabs(k - x);
        m.max_abs_error = std::max(m.max_abs_error, err);
        if (x != 0) m.max_rel_error = std::max(m.max_rel_error, err / std::fabs(x));
        m.max_ulp = std::max(m.max_ulp, ulp_distance(kernel_format, k, x));
      }
      const double normalized = normalized_error(k, x, bound), tight_normalized = normalized_error(k, x, tight);
      const bool over_worst = normalized > 1.0, over_tight = tight_normalized > 1.0 || over_worst;
      if (over_worst) ++m.over_bound;
      if (over_tight) ++m.over_tight;
      m.max_normalized_error = std::max(m.max_normalized_error, normalized);
      if (!over_tight && tight_normalized <= m.max_tight_error && m.worst) continue;

      ElementReport e{{spot.b, spot.h, spot.row_of(r), spot.per_row ? -1 : spot.col_offset + c}, k, x, bound, tight};
      if (over_tight && !m.first_failure) m.first_failure = e;
      if (over_worst && !m.first_worst_case_failure) m.first_worst_case_failure = e;
      if (!m.worst || tight_normalized > m.max_tight_error) {
        m.max_tight_error = tight_normalized;
        m.worst = e;
      }
    }
  }
  return m;
}

bool comes_before(const Index4& a, const Index4& b) {
  return std::tie(a.b, a.h, a.row, a.col) < std::tie(b.b, b.h, b.row, b.col);
}

void merge_metrics(Metrics& into, const Metrics& other) {
  const auto earlier = [](const std::optional<ElementReport>& a, const std::optional<ElementReport>& b) {
    if (!a) return b;
    if (!b) return a;
    return comes_before(b->index, a->index) ? b : a;
  };
  into.elements += other.elements;
  into.nan_kernel += other.nan_kernel;
  into.posinf_kernel += other.posinf_kernel;
  into.neginf_kernel += other.neginf_kernel;
  into.nan_reference += other.nan_reference;
  into.inf_reference += other.inf_reference;
  into.masked_neg_inf += other.masked_neg_inf;
  into.max_abs_error = std::max(into.max_abs_error, other.max_abs_error);
  into.max_rel_error = std::max(into.max_rel_error, other.max_rel_error);
  into.max_normalized_error = std::max(into.max_normalized_error, other.max_normalized_error);
  into.over_bound += other.over_bound;
  into.over_tight += other.over_tight;
  into.max_ulp = std::max(into.max_ulp, other.max_ulp);
  into.first_failure = earlier(into.first_failure, other.first_failure);
  into.first_worst_case_failure = earlier(into.first_worst_case_failure, other.first_worst_case_failure);
  if (other.worst && (!into.worst || other.max_tight_error > into.max_tight_error ||
                      (other.max_tight_error == into.max_tight_error &&
                       comes_before(other.worst->index, into.worst->index)))) {
    into.max_tight_error = other.max_tight_error;
    into.worst = other.worst;
  }
}

}  // namespace fc

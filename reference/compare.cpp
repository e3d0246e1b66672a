#include "reference/compare.h"

#include <cmath>
#include <limits>

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

Metrics compare_head(const HeadSpot& spot, const MatrixR& kernel, const Bounded& reference, DType kernel_format) {
  const MatrixR& ref = reference.value;
  if (kernel.rows() != ref.rows() || kernel.cols() != ref.cols()) {
    throw Error("compare: kernel tensor is " + std::to_string(kernel.rows()) + "x" + std::to_string(kernel.cols()) +
                ", reference " + std::to_string(ref.rows()) + "x" + std::to_string(ref.cols()));
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Metrics m;
  m.elements = kernel.size();
  for (Eigen::Index r = 0; r < ref.rows(); ++r) {
    for (Eigen::Index c = 0; c < ref.cols(); ++c) {
      const double k = kernel(r, c), x = ref(r, c), bound = reference.bound(r, c);
      if (std::isnan(k)) ++m.nan_kernel;
      if (k == kInf) ++m.posinf_kernel;
      if (k == -kInf) ++m.neginf_kernel;
      if (k == -kInf && x == -kInf) ++m.masked_neg_inf;
      if (std::isnan(x)) ++m.nan_reference;
      if (std::isinf(x)) ++m.inf_reference;

      double normalized;
      if (std::isfinite(x) && std::isfinite(k)) {
        const double err = std::fabs(k - x);
        m.max_abs_error = std::max(m.max_abs_error, err);
        if (x != 0) m.max_rel_error = std::max(m.max_rel_error, err / std::fabs(x));
        m.max_ulp = std::max(m.max_ulp, ulp_distance(kernel_format, k, x));
        normalized = err == 0 ? 0.0 : (bound > 0 ? err / bound : kInf);
      } else {
        const bool same = !std::isnan(x) && k == x;
        normalized = same ? 0.0 : kInf;
      }
      const bool fails = normalized > 1.0;
      if (fails) ++m.over_bound;
      if (!fails && normalized <= m.max_normalized_error && m.worst) continue;

      ElementReport e{{spot.b, spot.h, r, spot.per_row ? -1 : spot.col_offset + c}, k, x, bound};
      if (fails && !m.first_failure) m.first_failure = e;
      if (!m.worst || normalized > m.max_normalized_error) {
        m.max_normalized_error = normalized;
        m.worst = e;
      }
    }
  }
  return m;
}

void merge_after(Metrics& into, const Metrics& next) {
  into.elements += next.elements;
  into.nan_kernel += next.nan_kernel;
  into.posinf_kernel += next.posinf_kernel;
  into.neginf_kernel += next.neginf_kernel;
  into.nan_reference += next.nan_reference;
  into.inf_reference += next.inf_reference;
  into.masked_neg_inf += next.masked_neg_inf;
  into.max_abs_error = std::max(into.max_abs_error, next.max_abs_error);
  into.max_rel_error = std::max(into.max_rel_error, next.max_rel_error);
  into.over_bound += next.over_bound;
  into.max_ulp = std::max(into.max_ulp, next.max_ulp);
  if (!into.first_failure) into.first_failure = next.first_failure;
  if (next.worst && (!into.worst || next.max_normalized_error > into.max_normalized_error)) {
    into.max_normalized_error = next.max_normalized_error;
    into.worst = next.worst;
  }
}

}  // namespace fc

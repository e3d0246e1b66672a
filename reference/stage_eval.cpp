#include "reference/stage_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/numeric.h"
#include "reference/gpu/device_matrix.h"
#include "reference/stage_terms.h"

namespace fc {
namespace {

using stage_math::kAccEta;
using stage_math::RowIn;
using stage_math::RowOut;
using stage_math::SerialTeam;

constexpr double kInf = std::numeric_limits<double>::infinity();
// Keys summed per GEMM when the largest partial sum of P.V is tracked (eval_pv).
constexpr Eigen::Index kPrefixBlock = 64;

// |x| as the accumulation sees it (stage_terms.h, nominal_floor).
MatrixR accumulated_magnitude(const MatrixR& x, const Arithmetic& a) {
  const double floor = nominal_floor(a);
  if (floor == 0) return x.cwiseAbs();
  return x.unaryExpr([floor](double v) { return v == 0 ? 0.0 : std::max(std::fabs(v), floor); });
}

Bounded sized_like(Eigen::Index rows, Eigen::Index cols, DType format) {
  Bounded b;
  b.value.resize(rows, cols);
  b.bound.resize(rows, cols);
  b.tight.resize(rows, cols);
  b.format = format;
  return b;
}

void require_same_rows(const MatrixR& a, const MatrixR& b, const char* what) {
  if (a.rows() != b.rows()) throw Error(std::string("reference: row count mismatch in ") + what);
}

void require_host(const Bounded& b) {
  if (b.on_device()) throw Error("reference: a tensor that lives on the GPU given to the host evaluation");
}

// Row r of b, for the shared row math (null bounds: exact).
RowIn row_in(const Bounded& b, Eigen::Index r) {
  require_host(b);
  const Eigen::Index at = r * b.value.cols();
  if (b.exact()) return {b.value.data() + at, {nullptr, nullptr}};
  return {b.value.data() + at, {b.bound.data() + at, b.tight.data() + at}};
}

// E(p) |v| of one bound of p (zero for exact p) plus acc's.
MatrixR propagated(const MatrixR& p_bound, const MatrixR& v_abs, const MatrixR* acc_bound, Eigen::Index rows) {
  MatrixR m = p_bound.size() > 0 ? MatrixR(p_bound * v_abs) : MatrixR::Zero(rows, v_abs.cols());
  if (acc_bound && acc_bound->size() > 0) m += *acc_bound;
  return m;
}
RowOut row_out(Bounded& b, Eigen::Index r) {
  const Eigen::Index at = r * b.value.cols();
  return {b.value.data() + at, {b.bound.data() + at, b.tight.data() + at}};
}

}  // namespace

std::int64_t Bounded::rows() const { return device ? device->value.rows() : value.rows(); }
std::int64_t Bounded::cols() const { return device ? device->value.cols() : value.cols(); }

Bounded Bounded::exact(MatrixR value, DType format) {
  Bounded b;
  b.value = std::move(value);
  b.format = format;
  return b;
}

bool Bounded::exact() const {
  if (device) return device->bound.size() == 0 && device->value.size() > 0;
  return bound.size() == 0 && value.size() > 0;
}

double MaskedRows::dense_value(std::int64_t r, std::int64_t j) const {
  return mask.dense ? dense->get(mask.dense_index(row(r), j)) : 0.0;
}

const MatrixR& HeadInputs::no_matrix() {
  static const MatrixR none;
  return none;
}

void HeadInputs::set_kv(MatrixR own_k, MatrixR own_v) {
  kv_ = std::make_shared<const KvMatrices>(KvMatrices{std::move(own_k), std::move(own_v)});
  kv_id = 0;
}

double HeadInputs::bias_at(std::int64_t r, std::int64_t j) const {
  if (bias.size() > 0 || !masked_rows) return bias(r, j);
  const MaskedRows& m = *masked_rows;
  return m.mask.bias(m.row(r), j, m.dense_value(r, j));
}

Bounded eval_qk(const HeadInputs& in, std::int64_t col_begin, std::int64_t col_end,
                const Arithmetic& a) {
  const std::int64_t n = col_end - col_begin;
  auto k = in.k().middleRows(col_begin, n);
  const MatrixR t = in.scale * (in.q * k.transpose());
  const MatrixR magnitude =
      in.scale * (accumulated_magnitude(in.q, a) * accumulated_magnitude(k, a).transpose());
  const stage_math::QkTerms terms = qk_terms(a, in.q.cols(), in.scale, in.softcap);
  Bounded out = sized_like(t.rows(), t.cols(), a.out);
  for (Eigen::Index r = 0; r < t.rows(); ++r) {
    for (Eigen::Index c = 0; c < t.cols(); ++c) {
      stage_math::qk_element(t(r, c), magnitude(r, c), in.bias_at(r, col_begin + c), terms, &out.value(r, c),
                             &out.bound(r, c), &out.tight(r, c));
    }
  }
  return out;
}

SoftmaxResult eval_softmax(const Bounded& scores, const Arithmetic& a) {
  const Eigen::Index rows = scores.value.rows(), cols = scores.value.cols();
  SoftmaxResult res{sized_like(rows, cols, a.out), sized_like(rows, 1, scores.format), sized_like(rows, 1, DType::f32)};
  const stage_math::OutputTerms terms = output_terms(a);
  for (Eigen::Index r = 0; r < rows; ++r) {
    stage_math::softmax_row(SerialTeam{}, cols, row_in(scores, r), row_out(res.p, r), row_out(res.max, r),
                            row_out(res.sum, r), terms);
  }
  return res;
}

OnlineSoftmaxResult eval_online_softmax(const Bounded& scores_tile, const Bounded& prev_max,
                                        const Bounded& prev_sum, const Arithmetic& a) {
  require_same_rows(scores_tile.value, prev_max.value, "online softmax");
  require_same_rows(scores_tile.value, prev_sum.value, "online softmax");
  const Eigen::Index rows = scores_tile.value.rows(), cols = scores_tile.value.cols();
  OnlineSoftmaxResult res{sized_like(rows, cols, a.out), sized_like(rows, 1, DType::f32), sized_like(rows, 1, DType::f32),
                          sized_like(rows, 1, DType::f32)};
  const stage_math::OutputTerms terms = output_terms(a);
  for (Eigen::Index r = 0; r < rows; ++r) {
    stage_math::online_softmax_row(SerialTeam{}, cols, row_in(scores_tile, r), row_in(prev_max, r),
                                   row_in(prev_sum, r), row_out(res.p_tilde, r), row_out(res.max, r),
                                   row_out(res.sum, r), row_out(res.rescale, r), terms);
  }
  return res;
}

Bounded eval_rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                     const Arithmetic& a) {
  require_same_rows(acc.value, prev_max.value, "rescale");
  require_same_rows(acc.value, new_max.value, "rescale");
  Bounded out = sized_like(acc.value.rows(), acc.value.cols(), a.out);
  const stage_math::OutputTerms terms = output_terms(a);
  for (Eigen::Index r = 0; r < acc.value.rows(); ++r) {
    stage_math::rescale_row(SerialTeam{}, acc.value.cols(), row_in(acc, r), row_in(prev_max, r), row_in(new_max, r),
                            row_out(out, r), terms);
  }
  return out;
}

Bounded eval_pv(const Bounded& p, const MatrixR& v_rows, const Bounded* acc, const Arithmetic& a) {
  require_host(p);
  if (acc) require_host(*acc);
  if (p.value.cols() != v_rows.rows()) throw Error("reference: p and v disagree in key count");
  const Eigen::Index keys = v_rows.rows();
  const stage_math::PvTerms terms = pv_terms(a, p.format, keys);
  const MatrixR v_abs = v_rows.cwiseAbs();
  const MatrixR p_nominal = accumulated_magnitude(p.value, a), v_nominal = accumulated_magnitude(v_rows, a);

  // Block by block: the value, sum nu|p| nu|v| (+|acc|), and the reach, an upper bound on the
  // magnitude of every prefix acc + sum_{j<k} p_j v_j (a prefix inside a block is within the
  // block's start plus the block's sum of magnitudes).
  Bounded out;
  out.format = a.out;
  out.value = acc ? acc->value : MatrixR::Zero(p.value.rows(), v_rows.cols());
  MatrixR accumulated = out.value.cwiseAbs();
  MatrixR reach = accumulated;
  for (Eigen::Index j = 0; j < keys; j += kPrefixBlock) {
    const Eigen::Index width = std::min(kPrefixBlock, keys - j);
    const MatrixR block = p_nominal.middleCols(j, width) * v_nominal.middleRows(j, width);
    reach = reach.cwiseMax(out.value.cwiseAbs() + block);
    out.value.noalias() += p.value.middleCols(j, width) * v_rows.middleRows(j, width);
    accumulated += block;
  }
  reach = reach.cwiseMax(out.value.cwiseAbs());
  // sum |p||v| (+|acc|) as it is (without the tensor cores' nominal sizes).
  MatrixR magnitude = accumulated;
  if (a.tensor_cores) {
    magnitude = p.value.cwiseAbs() * v_abs;
    if (acc) magnitude += acc->value.cwiseAbs();
  }
  const Eigen::Index rows = p.value.rows();
  const MatrixR propagated_worst = propagated(p.bound, v_abs, acc ? &acc->bound : nullptr, rows);
  const MatrixR propagated_tight = propagated(p.tight, v_abs, acc ? &acc->tight : nullptr, rows);
  MatrixR squares;
  Eigen::RowVectorXd v_norm, operand_floor = terms.eta_operand * v_abs.colwise().sum();
  if (terms.u_operand > 0) {
    squares = p.value.cwiseAbs2() * v_rows.cwiseAbs2();
    v_norm = v_rows.cwiseAbs2().colwise().sum().cwiseSqrt();
  }
  out.bound.resize(out.value.rows(), out.value.cols());
  out.tight.resize(out.value.rows(), out.value.cols());
  for (Eigen::Index r = 0; r < out.value.rows(); ++r) {
    for (Eigen::Index c = 0; c < out.value.cols(); ++c) {
      const bool rounded = terms.u_operand > 0;
      const stage_math::PvElement x{out.value(r, c), accumulated(r, c), reach(r, c), magnitude(r, c),
                                    {propagated_worst(r, c), propagated_tight(r, c)},
                                    rounded ? squares(r, c) : 0.0, operand_floor(c), rounded ? v_norm(c) : 0.0};
      stage_math::pv_element(x, terms, &out.bound(r, c), &out.tight(r, c));
    }
  }
  return out;
}

Bounded eval_normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a) {
  require_same_rows(acc.value, sum.value, "normalize");
  Bounded out = sized_like(acc.value.rows(), acc.value.cols(), a.out);
  const stage_math::OutputTerms terms = output_terms(a);
  for (Eigen::Index r = 0; r < acc.value.rows(); ++r) {
    stage_math::normalize_row(SerialTeam{}, acc.value.cols(), row_in(acc, r), row_in(sum, r), row_out(out, r), terms);
  }
  return out;
}

Bounded eval_within_value_range(const Bounded& out, const MatrixR& v_rows, const Arithmetic& pv) {
  require_host(out);
  if (v_rows.rows() == 0 || out.bound.size() == 0) return out;
  if (out.value.cols() != v_rows.cols()) throw Error("reference: the output and v disagree in columns");
  const stage_math::RangeTerms terms = range_terms(pv, out.format, v_rows.rows());
  // Each column's range, a NaN passed over as the GPU's reduction does (stage_kernels.cu).
  Eigen::RowVectorXd low = Eigen::RowVectorXd::Constant(v_rows.cols(), kInf), high = -low;
  for (Eigen::Index j = 0; j < v_rows.rows(); ++j) {
    for (Eigen::Index c = 0; c < v_rows.cols(); ++c) {
      low(c) = stage_math::smaller(low(c), v_rows(j, c));
      high(c) = stage_math::larger(high(c), v_rows(j, c));
    }
  }
  Bounded capped = out;
  for (Eigen::Index r = 0; r < out.value.rows(); ++r) {
    for (Eigen::Index c = 0; c < out.value.cols(); ++c) {
      const double cap = stage_math::range_cap(out.value(r, c), low(c), high(c), terms);
      capped.bound(r, c) = stage_math::smaller(out.bound(r, c), cap);
      capped.tight(r, c) = stage_math::smaller(out.tight(r, c), cap);
    }
  }
  return capped;
}

Bounded eval_lse(const Bounded& max, const Bounded& sum, const Arithmetic& a) {
  require_same_rows(max.value, sum.value, "lse");
  Bounded out = sized_like(max.value.rows(), 1, a.out);
  const stage_math::OutputTerms terms = output_terms(a);
  for (Eigen::Index r = 0; r < max.value.rows(); ++r) {
    stage_math::lse_element(row_in(max, r), row_in(sum, r), row_out(out, r), terms);
  }
  return out;
}

Bounded eval_combine(const std::vector<Bounded>& outs, const std::vector<Bounded>& lses,
                     const Arithmetic& a) {
  if (outs.empty() || outs.size() != lses.size()) throw Error("reference: combine needs one lse per partial");
  const Eigen::Index rows = outs[0].value.rows(), cols = outs[0].value.cols();
  Bounded out = sized_like(rows, cols, a.out);
  const stage_math::OutputTerms terms = output_terms(a);
  const int splits = static_cast<int>(outs.size());
  for (Eigen::Index r = 0; r < rows; ++r) {
    stage_math::combine_row(
        SerialTeam{}, cols, splits, [&](int t) { return row_in(outs[static_cast<std::size_t>(t)], r); },
        [&](int t) { return row_in(lses[static_cast<std::size_t>(t)], r); }, row_out(out, r), terms);
  }
  return out;
}

Bounded eval_combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a) {
  if (lses.empty()) throw Error("reference: combine needs at least one lse");
  const Eigen::Index rows = lses[0].value.rows();
  Bounded out = sized_like(rows, 1, a.out);
  const stage_math::OutputTerms terms = output_terms(a);
  for (Eigen::Index r = 0; r < rows; ++r) {
    stage_math::combine_lse_element(
        static_cast<int>(lses.size()), [&](int t) { return row_in(lses[static_cast<std::size_t>(t)], r); },
        row_out(out, r), terms);
  }
  return out;
}

}  // namespace fc

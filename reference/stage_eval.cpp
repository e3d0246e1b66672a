#include "reference/stage_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/numeric.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kAccU = unit_roundoff(DType::f32);            // fp32 accumulation
// Absolute error floor of one fp32 operation: results below the smallest normal number may
// be flushed to zero (GPU fast math, ex2.approx.ftz), so 2^-126 rather than half a subnormal.
const double kAccEta = std::ldexp(1.0, -126);

// Rounding to format t near zero: at most half its smallest subnormal, absolute. Like every
// rounding term it carries the safety factor.
double eta(DType t) { return kSafetyFactor * min_subnormal(t) / 2; }

// Relative error of exp(x) as a kernel computes it in fp32 from x = s - m: the subtraction
// (|x| u), the argument scaling of exp2-based and fast exp (about 2|x| u) and the exp itself
// (a few ulp). docs/error-model.md, "exp".
double exp_rel_error(double x) { return (4.0 + 4.0 * std::fabs(x)) * kAccU; }

// Unit roundoff of one addition of the stage's fp32 accumulation.
double accumulation_unit(const Arithmetic& a) { return a.tensor_cores ? 2 * kAccU : kAccU; }

// |x| as the accumulation sees it: a tensor core aligns products by their operands'
// exponents, and a subnormal operand counts with the smallest normal exponent of the
// operand format (docs/error-model.md, "Tensor cores"), so its size is at least that.
MatrixR accumulated_magnitude(const MatrixR& x, const Arithmetic& a) {
  if (!a.tensor_cores) return x.cwiseAbs();
  const double nominal = min_normal(a.operand);
  return x.unaryExpr([nominal](double v) { return v == 0 ? 0.0 : std::max(std::fabs(v), nominal); });
}

// Operand rounding inside a stage happens only when the operand format is narrower than
// what the stage reads.
double operand_rounding(const Arithmetic& a, DType input_format) {
  double u_op = unit_roundoff(a.operand);
  return u_op > unit_roundoff(input_format) ? u_op : 0.0;
}

MatrixR zeros_like(const MatrixR& m) { return MatrixR::Zero(m.rows(), m.cols()); }

void require_same_rows(const MatrixR& a, const MatrixR& b, const char* what) {
  if (a.rows() != b.rows()) throw Error(std::string("reference: row count mismatch in ") + what);
}

// ---- Weights of a softmax under score errors (docs/error-model.md, "Finite masking biases").
// A score with a finite but huge masking bias (-65504, -3.4e38: Hugging Face's masks) carries
// an absolute bound far beyond any other of its row. Only scores that can be the row's max
// move the max; an error moves each weight in proportion to that weight; and a weight stays
// in [0, 1] whatever its inputs. So such keys add nothing where their weight underflows, and
// no bound is ever 0 x inf.

// How far max_k (x_k + d_k), |d_k| <= e_k, can lie from max_k x_k: the largest e_k among the
// entries that can be the max, x_k + e_k >= max_j (x_j - e_j). `entry(k)` gives (x_k, e_k);
// -inf entries (masked) take no part.
template <class Entry>
double max_shift(Eigen::Index n, Entry entry) {
  double lower = -kInf, shift = 0;
  for (Eigen::Index k = 0; k < n; ++k) {
    const auto [x, e] = entry(k);
    if (x != -kInf) lower = std::max(lower, x - e);
  }
  for (Eigen::Index k = 0; k < n; ++k) {
    const auto [x, e] = entry(k);
    if (x != -kInf && x + e >= lower) shift = std::max(shift, e);
  }
  return shift;
}

// ln sum_k w_k e^{e_k} for weights w_k = e^{log w_k} summing to 1: how far errors |d_k| <= e_k
// can move ln sum_k w_k e^{d_k} (Jensen both ways). `entry(k)` gives (log w_k, e_k); inf when
// it overflows.
template <class Entry>
double weighted_log_shift(Eigen::Index n, Entry entry) {
  double top = -kInf;
  for (Eigen::Index k = 0; k < n; ++k) {
    const auto [log_w, e] = entry(k);
    if (log_w != -kInf) top = std::max(top, log_w + e);
  }
  if (top == -kInf || std::isinf(top)) return top == -kInf ? 0.0 : kInf;
  double sum = 0;
  for (Eigen::Index k = 0; k < n; ++k) {
    const auto [log_w, e] = entry(k);
    if (log_w != -kInf) sum += std::exp(log_w + e - top);
  }
  return std::max(0.0, top + std::log(sum));
}

// value * (e^e - 1) for value = e^{log_value}: what an error e of its log moves a positive
// value; computed from the log where the value underflowed, inf where it overflows.
double exp_growth(double value, double log_value, double e) {
  if (!(e > 0)) return 0;
  if (value > 0) return value * std::expm1(e);
  return std::exp(log_value + e);
}

// A bound on |x' - x| when both lie in [lo, hi].
double within_range(double bound, double x, double lo, double hi) {
  return std::min(bound, std::max(x - lo, hi - x));
}

}  // namespace

Bounded Bounded::exact(MatrixR value, DType format) {
  Bounded b;
  b.bound = zeros_like(value);
  b.value = std::move(value);
  b.format = format;
  return b;
}

Bounded eval_qk(const HeadInputs& in, std::int64_t col_begin, std::int64_t col_end,
                const Arithmetic& a) {
  const std::int64_t n = col_end - col_begin;
  const double d = static_cast<double>(in.q.cols());
  auto k = in.k.middleRows(col_begin, n);
  const MatrixR t = in.scale * (in.q * k.transpose());
  const MatrixR magnitude =
      in.scale * (accumulated_magnitude(in.q, a) * accumulated_magnitude(k, a).transpose());
  // Softcap (docs/error-model.md, "qk"): c tanh(t / c) has derivative sech^2 <= 1, so the dot
  // product's error passes at most 1:1; the argument t / c rounds (2 u |t| after the tanh),
  // the tanh (tanhf, 2 ulp) and the multiply by c round relative to the capped score.
  const double cap = in.softcap;
  const MatrixR capped = cap > 0 ? MatrixR(t.unaryExpr([cap](double x) { return cap * std::tanh(x / cap); })) : t;
  MatrixR s = capped + in.bias.middleCols(col_begin, n);

  Bounded out;
  out.format = a.out;
  out.bound.resize(s.rows(), s.cols());
  const double u_out = unit_roundoff(a.out), u_acc = accumulation_unit(a);
  const double underflow = (d + 1) * kAccEta * std::max(1.0, in.scale);
  for (Eigen::Index r = 0; r < s.rows(); ++r) {
    for (Eigen::Index c = 0; c < s.cols(); ++c) {
      const double v = s(r, c);
      // A score that overflows the output format to -inf is stored as -inf: masked.
      if (v < 0 && std::isinf(round_to(a.out, v))) s(r, c) = -kInf;
      const double softcap = cap > 0 ? kAccU * (2 * std::fabs(t(r, c)) + 4 * std::fabs(capped(r, c))) : 0.0;
      out.bound(r, c) = std::isfinite(s(r, c))
          ? kSafetyFactor * ((d + 1) * u_acc * magnitude(r, c) + softcap + (kAccU + u_out) * std::fabs(v) + underflow) +
                eta(a.out)
          : 0.0;
    }
  }
  out.value = std::move(s);
  return out;
}

SoftmaxResult eval_softmax(const Bounded& scores, const Arithmetic& a) {
  const MatrixR& s = scores.value;
  const Eigen::Index rows = s.rows(), cols = s.cols();
  SoftmaxResult res;
  res.p.value = zeros_like(s);
  res.p.bound = MatrixR::Constant(rows, cols, eta(a.out));
  res.p.format = a.out;
  res.max.value = MatrixR::Constant(rows, 1, -kInf);
  res.max.bound = MatrixR::Zero(rows, 1);
  res.max.format = scores.format;
  res.sum.value = MatrixR::Zero(rows, 1);
  res.sum.bound = MatrixR::Constant(rows, 1, eta(DType::f32));
  res.sum.format = DType::f32;
  const double u_out = unit_roundoff(a.out);

  for (Eigen::Index r = 0; r < rows; ++r) {
    const double m = s.row(r).maxCoeff();
    if (m == -kInf) continue;  // fully masked row: the convention above
    const double e_max = max_shift(cols, [&](Eigen::Index c) { return std::pair(s(r, c), scores.bound(r, c)); });
    double l = 0, n = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      l += std::exp(s(r, c) - m);
      n += 1;
    }
    const double log_l = std::log(l);
    // How far the errors move ln sum_k p_k e^{d_k}, the normalization's share of ln p_j.
    const double e_norm =
        weighted_log_shift(cols, [&](Eigen::Index c) { return std::pair(s(r, c) - m - log_l, scores.bound(r, c)); });
    double weighted_exp_err = 0;  // sum_k p_k * exp error of term k
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double p = std::exp(s(r, c) - m) / l;
      res.p.value(r, c) = p;
      weighted_exp_err += p * exp_rel_error(s(r, c) - m);
    }
    double sum_propagated = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double x = s(r, c) - m, p = res.p.value(r, c);
      const double propagated = within_range(exp_growth(p, x - log_l, scores.bound(r, c) + e_norm), p, 0, 1);
      const double local = p * (exp_rel_error(x) + weighted_exp_err + (n + 2) * kAccU + u_out) + 2 * kAccEta;
      res.p.bound(r, c) = propagated + kSafetyFactor * local + eta(a.out);
      sum_propagated += exp_growth(std::exp(x), x, scores.bound(r, c) + e_max);
    }
    res.max.value(r, 0) = m;
    res.max.bound(r, 0) = e_max;
    res.sum.value(r, 0) = l;
    // The sum relative to its own max lies in [1, n] whatever the scores.
    res.sum.bound(r, 0) = within_range(sum_propagated, l, 1, n) +
                          kSafetyFactor * (l * (weighted_exp_err + n * kAccU) + n * kAccEta) + eta(DType::f32);
  }
  return res;
}

OnlineSoftmaxResult eval_online_softmax(const Bounded& scores_tile, const Bounded& prev_max,
                                        const Bounded& prev_sum, const Arithmetic& a) {
  const MatrixR& s = scores_tile.value;
  require_same_rows(s, prev_max.value, "online softmax");
  require_same_rows(s, prev_sum.value, "online softmax");
  const Eigen::Index rows = s.rows(), cols = s.cols();
  const double u_out = unit_roundoff(a.out);
  OnlineSoftmaxResult res;
  res.p_tilde.value = zeros_like(s);
  res.p_tilde.bound = MatrixR::Constant(rows, cols, eta(a.out));
  res.p_tilde.format = a.out;
  res.max.value.resize(rows, 1);
  res.max.bound.resize(rows, 1);
  res.max.format = DType::f32;
  res.sum.value.resize(rows, 1);
  res.sum.bound.resize(rows, 1);
  res.sum.format = DType::f32;
  res.rescale.value.resize(rows, 1);
  res.rescale.bound.resize(rows, 1);
  res.rescale.format = DType::f32;

  for (Eigen::Index r = 0; r < rows; ++r) {
    const double mp = prev_max.value(r, 0), lp = prev_sum.value(r, 0);
    const double mn = std::max(mp, s.row(r).maxCoeff());
    // A max of perturbed values moves by at most the largest perturbation of those that can be the max.
    const double e_max = max_shift(cols + 1, [&](Eigen::Index c) {
      return c == cols ? std::pair(mp, prev_max.bound(r, 0)) : std::pair(s(r, c), scores_tile.bound(r, c));
    });
    res.max.value(r, 0) = mn;
    res.max.bound(r, 0) = mn == -kInf ? 0.0 : e_max;

    if (mn == -kInf) {  // nothing attended yet
      res.rescale.value(r, 0) = 0;
      res.rescale.bound(r, 0) = 0;
      res.sum.value(r, 0) = 0;
      res.sum.bound(r, 0) = eta(DType::f32);
      continue;
    }
    const double rr = mp == -kInf ? 0.0 : std::exp(mp - mn);
    // r and p~ lie in [0, 1]: exp of a value minus a max at least as large.
    const double r_propagated =
        mp == -kInf ? 0.0 : within_range(exp_growth(rr, mp - mn, prev_max.bound(r, 0) + e_max), rr, 0, 1);
    const double r_local = mp == -kInf ? 0.0 : exp_rel_error(mp - mn);
    res.rescale.value(r, 0) = rr;
    res.rescale.bound(r, 0) = r_propagated + kSafetyFactor * (rr * r_local + kAccEta) + eta(DType::f32);

    double tile_sum = 0, tile_exp_err = 0, tile_propagated = 0, n = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double x = s(r, c) - mn;
      const double pt = std::exp(x);
      const double propagated = within_range(exp_growth(pt, x, scores_tile.bound(r, c) + e_max), pt, 0, 1);
      res.p_tilde.value(r, c) = pt;
      res.p_tilde.bound(r, c) = propagated + kSafetyFactor * (pt * (exp_rel_error(x) + u_out) + kAccEta) + eta(a.out);
      tile_sum += pt;
      tile_exp_err += pt * exp_rel_error(x);
      tile_propagated += propagated;
      n += 1;
    }
    const double l = rr * lp + tile_sum;
    res.sum.value(r, 0) = l;
    // |r' l_p' - r l_p| <= r E(l_p) + l_p E(r) + E(r) E(l_p): the product of two uncertain values.
    const double propagated =
        rr * prev_sum.bound(r, 0) + lp * r_propagated + r_propagated * prev_sum.bound(r, 0) + tile_propagated;
    // The tile sum may be formed from p~ as stored (u_out), as a kernel that sums after
    // converting to the GEMM operand format does.
    const double local = rr * lp * (r_local + kAccU) + lp * kAccEta + tile_exp_err + u_out * tile_sum +
                         (n + 1) * kAccU * l + (n + 1) * kAccEta;
    res.sum.bound(r, 0) = propagated + kSafetyFactor * local + eta(DType::f32);
  }
  return res;
}

Bounded eval_rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                     const Arithmetic& a) {
  require_same_rows(acc.value, prev_max.value, "rescale");
  require_same_rows(acc.value, new_max.value, "rescale");
  const double u_out = unit_roundoff(a.out);
  Bounded out;
  out.format = a.out;
  out.value.resize(acc.value.rows(), acc.value.cols());
  out.bound.resize(acc.value.rows(), acc.value.cols());
  for (Eigen::Index r = 0; r < acc.value.rows(); ++r) {
    const double mp = prev_max.value(r, 0), mn = new_max.value(r, 0);
    const bool defined = mp != -kInf && mn != -kInf;
    const double rr = defined ? std::exp(mp - mn) : 0.0;
    const double r_propagated =
        defined ? within_range(exp_growth(rr, mp - mn, prev_max.bound(r, 0) + new_max.bound(r, 0)), rr, 0, 1) : 0.0;
    const double local_rel = (defined ? exp_rel_error(mp - mn) : 0.0) + kAccU + u_out;
    for (Eigen::Index c = 0; c < acc.value.cols(); ++c) {
      const double x = acc.value(r, c);
      out.value(r, c) = rr * x;
      // r itself may underflow: an absolute kAccEta on r, times |acc|.
      out.bound(r, c) = rr * acc.bound(r, c) + std::fabs(x) * r_propagated + r_propagated * acc.bound(r, c) +
                        kSafetyFactor * (rr * std::fabs(x) * local_rel + (std::fabs(x) + 1) * kAccEta) + eta(a.out);
    }
  }
  return out;
}

Bounded eval_pv(const Bounded& p, const MatrixR& v_rows, const Bounded* acc, const Arithmetic& a) {
  if (p.value.cols() != v_rows.rows()) throw Error("reference: p and v disagree in key count");
  const double n = static_cast<double>(v_rows.rows());
  const double u_out = unit_roundoff(a.out);
  const double u_p = operand_rounding(a, p.format);
  // Rounding p to a narrow operand loses up to half its smallest subnormal per element.
  const double eta_p = u_p > 0 ? eta(a.operand) : 0.0;
  const MatrixR v_abs = v_rows.cwiseAbs();

  Bounded out;
  out.format = a.out;
  out.value = p.value * v_rows;
  MatrixR magnitude = p.value.cwiseAbs() * v_abs;
  MatrixR accumulated = accumulated_magnitude(p.value, a) * accumulated_magnitude(v_rows, a);
  MatrixR propagated = p.bound * v_abs;
  if (acc) {
    out.value += acc->value;
    magnitude += acc->value.cwiseAbs();
    accumulated += acc->value.cwiseAbs();
    propagated += acc->bound;
  }
  const double underflow = n * kAccEta;
  const Eigen::RowVectorXd operand_floor = eta_p * v_abs.colwise().sum();
  out.bound = propagated.array() +
              kSafetyFactor * ((n + 2) * accumulation_unit(a) * accumulated.array() + u_p * magnitude.array() +
                               u_out * out.value.array().abs() + operand_floor.replicate(out.value.rows(), 1).array() +
                               underflow) +
              eta(a.out);
  return out;
}

Bounded eval_normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a) {
  require_same_rows(acc.value, sum.value, "normalize");
  const double u_out = unit_roundoff(a.out);
  Bounded out;
  out.format = a.out;
  out.value = zeros_like(acc.value);
  out.bound = MatrixR::Constant(acc.value.rows(), acc.value.cols(), eta(a.out));
  for (Eigen::Index r = 0; r < acc.value.rows(); ++r) {
    const double l = sum.value(r, 0);
    if (l == 0) continue;  // fully masked row: output 0
    // acc'/l' - acc/l = ((acc' - acc) - o (l' - l)) / l', and a sum relative to its own max is
    // at least 1: l' >= max(l - E(l), 1).
    const double least_sum = std::max(l - sum.bound(r, 0), 1.0);
    for (Eigen::Index c = 0; c < acc.value.cols(); ++c) {
      const double o = acc.value(r, c) / l;
      out.value(r, c) = o;
      out.bound(r, c) = (acc.bound(r, c) + std::fabs(o) * sum.bound(r, 0)) / least_sum +
                        kSafetyFactor * ((2 * kAccU + u_out) * std::fabs(o) + kAccEta) + eta(a.out);
    }
  }
  return out;
}

Bounded eval_lse(const Bounded& max, const Bounded& sum, const Arithmetic& a) {
  require_same_rows(max.value, sum.value, "lse");
  const double u_out = unit_roundoff(a.out);
  Bounded out;
  out.format = a.out;
  out.value.resize(max.value.rows(), 1);
  out.bound.resize(max.value.rows(), 1);
  for (Eigen::Index r = 0; r < max.value.rows(); ++r) {
    const double m = max.value(r, 0), l = sum.value(r, 0);
    if (l == 0 || m == -kInf) {
      out.value(r, 0) = -kInf;
      out.bound(r, 0) = 0;
      continue;
    }
    const double lse = m + std::log(l);
    out.value(r, 0) = lse;
    // l' lies in [max(l - E(l), 1), l + E(l)]: a sum relative to its own max is at least 1.
    const double e_l = sum.bound(r, 0);
    const double log_moved = std::max(std::log1p(e_l / l), std::log(l) - std::log(std::max(l - e_l, 1.0)));
    // log in fp32 is good to a few ulp of its result; the add rounds once more.
    const double local = kAccU * (std::fabs(m) + 4 * std::fabs(std::log(l)) + 4) + (kAccU + u_out) * std::fabs(lse);
    out.bound(r, 0) = max.bound(r, 0) + log_moved + kSafetyFactor * local + eta(a.out);
  }
  return out;
}

Bounded eval_combine(const std::vector<Bounded>& outs, const std::vector<Bounded>& lses,
                     const Arithmetic& a) {
  if (outs.empty() || outs.size() != lses.size()) throw Error("reference: combine needs one lse per partial");
  const Eigen::Index rows = outs[0].value.rows(), cols = outs[0].value.cols();
  const double splits = static_cast<double>(outs.size());
  const double u_out = unit_roundoff(a.out);
  Bounded out;
  out.format = a.out;
  out.value = MatrixR::Zero(rows, cols);
  out.bound = MatrixR::Constant(rows, cols, eta(a.out));
  const Eigen::Index count = static_cast<Eigen::Index>(lses.size());
  for (Eigen::Index r = 0; r < rows; ++r) {
    double top = -kInf;
    for (const Bounded& l : lses) top = std::max(top, l.value(r, 0));
    if (top == -kInf) continue;  // every split empty: fully masked row
    double total = 0, exp_err = 0;
    for (const Bounded& l : lses) {
      if (l.value(r, 0) == -kInf) continue;
      total += std::exp(l.value(r, 0) - top);
      exp_err = std::max(exp_err, exp_rel_error(l.value(r, 0) - top));
    }
    const double log_total = std::log(total);
    auto log_weight = [&](Eigen::Index t) { return lses[static_cast<std::size_t>(t)].value(r, 0) - top - log_total; };
    const double e_norm = weighted_log_shift(
        count, [&](Eigen::Index t) { return std::pair(log_weight(t), lses[static_cast<std::size_t>(t)].bound(r, 0)); });
    for (Eigen::Index c = 0; c < cols; ++c) {
      double value = 0, magnitude = 0, propagated = 0, peak = 0, weights_moved = 0;
      for (std::size_t t = 0; t < outs.size(); ++t) {
        if (lses[t].value(r, 0) == -kInf) continue;
        const double w = std::exp(lses[t].value(r, 0) - top) / total;
        value += w * outs[t].value(r, c);
        magnitude += w * std::fabs(outs[t].value(r, c));
        peak = std::max(peak, std::fabs(outs[t].value(r, c)));
        propagated += w * outs[t].bound(r, c);
        const double moved = exp_growth(w, log_weight(static_cast<Eigen::Index>(t)), lses[t].bound(r, 0) + e_norm);
        // w' o' - w o = w (o' - o) + (w' - w) o + (w' - w)(o' - o)
        weights_moved += within_range(moved, w, 0, 1) * (std::fabs(outs[t].value(r, c)) + outs[t].bound(r, c));
      }
      out.value(r, c) = value;
      out.bound(r, c) = propagated + weights_moved +
                        kSafetyFactor * ((2 * exp_err + (2 * splits + 2) * kAccU + u_out) * magnitude +
                                         (splits * peak + 1) * kAccEta) +
                        eta(a.out);
    }
  }
  return out;
}

Bounded eval_combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a) {
  if (lses.empty()) throw Error("reference: combine needs at least one lse");
  const Eigen::Index rows = lses[0].value.rows(), count = static_cast<Eigen::Index>(lses.size());
  const double u_out = unit_roundoff(a.out);
  Bounded out;
  out.format = a.out;
  out.value = MatrixR::Constant(rows, 1, -kInf);
  out.bound = MatrixR::Zero(rows, 1);
  for (Eigen::Index r = 0; r < rows; ++r) {
    double top = -kInf;
    for (const Bounded& l : lses) top = std::max(top, l.value(r, 0));
    if (top == -kInf) continue;  // every split empty
    double total = 0, exp_err = 0;
    for (const Bounded& l : lses) {
      if (l.value(r, 0) == -kInf) continue;
      total += std::exp(l.value(r, 0) - top);
      exp_err = std::max(exp_err, exp_rel_error(l.value(r, 0) - top));
    }
    const double log_total = std::log(total), lse = top + log_total;
    // ln sum_t e^{lse_t + d_t} moves by ln sum_t w_t e^{d_t}; the sum of T exps, its log and the add round.
    const double propagated = weighted_log_shift(count, [&](Eigen::Index t) {
      const Bounded& l = lses[static_cast<std::size_t>(t)];
      return std::pair(l.value(r, 0) - top - log_total, l.bound(r, 0));
    });
    const double local = exp_err + (static_cast<double>(count) + 1) * kAccU +
                         kAccU * (std::fabs(top) + 4 * std::fabs(log_total) + 4) + (kAccU + u_out) * std::fabs(lse);
    out.value(r, 0) = lse;
    out.bound(r, 0) = propagated + kSafetyFactor * local + eta(a.out);
  }
  return out;
}

}  // namespace fc

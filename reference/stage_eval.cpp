#include "reference/stage_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

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

// Unit roundoff of one addition of the stage's matmul accumulation (fp32 unless declared).
double accumulation_unit(const Arithmetic& a) {
  const double u = unit_roundoff(a.accumulate);
  return a.tensor_cores ? 2 * u : u;
}

// Absolute floor of one accumulation step: kAccEta in fp32; a narrower accumulator may
// flush below its smallest normal number.
double accumulation_floor(const Arithmetic& a) {
  return a.accumulate == DType::f32 ? kAccEta : std::max(kAccEta, min_normal(a.accumulate));
}

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

// exp(e) - 1 for a nonnegative error e: the relative change of exp(x) when x moves by e.
double grow(double e) { return std::expm1(e); }

MatrixR zeros_like(const MatrixR& m) { return MatrixR::Zero(m.rows(), m.cols()); }

// Largest bound over the finite entries of row r.
double row_max_bound(const Bounded& x, Eigen::Index r) {
  double e = 0;
  for (Eigen::Index c = 0; c < x.value.cols(); ++c) {
    if (std::isfinite(x.value(r, c))) e = std::max(e, x.bound(r, c));
  }
  return e;
}

void require_same_rows(const MatrixR& a, const MatrixR& b, const char* what) {
  if (a.rows() != b.rows()) throw Error(std::string("reference: row count mismatch in ") + what);
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
  MatrixR s = in.scale * (in.q * k.transpose());
  const MatrixR magnitude =
      in.scale * (accumulated_magnitude(in.q, a) * accumulated_magnitude(k, a).transpose());
  s += in.bias.middleCols(col_begin, n);

  Bounded out;
  out.format = a.out;
  out.bound.resize(s.rows(), s.cols());
  const double u_out = unit_roundoff(a.out), u_acc = accumulation_unit(a);
  const double underflow = (d + 1) * accumulation_floor(a) * std::max(1.0, in.scale);
  for (Eigen::Index r = 0; r < s.rows(); ++r) {
    for (Eigen::Index c = 0; c < s.cols(); ++c) {
      const double v = s(r, c);
      out.bound(r, c) = std::isfinite(v)
          ? kSafetyFactor * ((d + 1) * u_acc * magnitude(r, c) + (kAccU + u_out) * std::fabs(v) + underflow) + eta(a.out)
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
    const double e_in = row_max_bound(scores, r);
    double l = 0, n = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      l += std::exp(s(r, c) - m);
      n += 1;
    }
    double weighted_exp_err = 0;  // sum_k p_k * exp error of term k
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double p = std::exp(s(r, c) - m) / l;
      res.p.value(r, c) = p;
      weighted_exp_err += p * exp_rel_error(s(r, c) - m);
    }
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double p = res.p.value(r, c);
      const double propagated = p * grow(scores.bound(r, c) + e_in);
      const double local = p * (exp_rel_error(s(r, c) - m) + weighted_exp_err + (n + 2) * kAccU + u_out) + 2 * kAccEta;
      res.p.bound(r, c) = propagated + kSafetyFactor * local + eta(a.out);
    }
    res.max.value(r, 0) = m;
    res.max.bound(r, 0) = e_in;
    res.sum.value(r, 0) = l;
    res.sum.bound(r, 0) = l * grow(2 * e_in) + kSafetyFactor * (l * (weighted_exp_err + n * kAccU) + n * kAccEta) + eta(DType::f32);
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
    // A max of perturbed values moves by at most the largest perturbation.
    double e_max = mp == -kInf ? 0.0 : prev_max.bound(r, 0);
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) != -kInf) e_max = std::max(e_max, scores_tile.bound(r, c));
    }
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
    const double e_r = mp == -kInf ? 0.0 : grow(prev_max.bound(r, 0) + e_max);
    const double r_local = mp == -kInf ? 0.0 : exp_rel_error(mp - mn);
    res.rescale.value(r, 0) = rr;
    res.rescale.bound(r, 0) = rr * e_r + kSafetyFactor * (rr * r_local + kAccEta) + eta(DType::f32);

    double tile_sum = 0, tile_exp_err = 0, tile_propagated = 0, n = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double x = s(r, c) - mn;
      const double pt = std::exp(x);
      const double propagated = pt * grow(scores_tile.bound(r, c) + e_max);
      res.p_tilde.value(r, c) = pt;
      res.p_tilde.bound(r, c) = propagated + kSafetyFactor * (pt * (exp_rel_error(x) + u_out) + kAccEta) + eta(a.out);
      tile_sum += pt;
      tile_exp_err += pt * exp_rel_error(x);
      tile_propagated += propagated;
      n += 1;
    }
    const double l = rr * lp + tile_sum;
    res.sum.value(r, 0) = l;
    const double propagated = rr * prev_sum.bound(r, 0) + rr * lp * e_r + tile_propagated;
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
    const double e_r = defined ? grow(prev_max.bound(r, 0) + new_max.bound(r, 0)) : 0.0;
    const double local_rel = (defined ? exp_rel_error(mp - mn) : 0.0) + kAccU + u_out;
    for (Eigen::Index c = 0; c < acc.value.cols(); ++c) {
      const double x = acc.value(r, c);
      out.value(r, c) = rr * x;
      // r itself may underflow: an absolute kAccEta on r, times |acc|.
      out.bound(r, c) = rr * acc.bound(r, c) + rr * std::fabs(x) * e_r +
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
  const double underflow = n * accumulation_floor(a);
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
    for (Eigen::Index c = 0; c < acc.value.cols(); ++c) {
      const double o = acc.value(r, c) / l;
      out.value(r, c) = o;
      out.bound(r, c) = acc.bound(r, c) / l + std::fabs(o) * sum.bound(r, 0) / l +
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
    // log in fp32 is good to a few ulp of its result; the add rounds once more.
    const double local = kAccU * (std::fabs(m) + 4 * std::fabs(std::log(l)) + 4) + (kAccU + u_out) * std::fabs(lse);
    out.bound(r, 0) = max.bound(r, 0) + sum.bound(r, 0) / l + kSafetyFactor * local + eta(a.out);
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
  for (Eigen::Index r = 0; r < rows; ++r) {
    double top = -kInf, e_lse = 0;
    for (const Bounded& l : lses) {
      top = std::max(top, l.value(r, 0));
      if (l.value(r, 0) != -kInf) e_lse = std::max(e_lse, l.bound(r, 0));
    }
    if (top == -kInf) continue;  // every split empty: fully masked row
    double total = 0, exp_err = 0;
    for (const Bounded& l : lses) {
      if (l.value(r, 0) == -kInf) continue;
      total += std::exp(l.value(r, 0) - top);
      exp_err = std::max(exp_err, exp_rel_error(l.value(r, 0) - top));
    }
    for (Eigen::Index c = 0; c < cols; ++c) {
      double value = 0, magnitude = 0, propagated = 0, peak = 0;
      for (std::size_t t = 0; t < outs.size(); ++t) {
        if (lses[t].value(r, 0) == -kInf) continue;
        const double w = std::exp(lses[t].value(r, 0) - top) / total;
        value += w * outs[t].value(r, c);
        magnitude += w * std::fabs(outs[t].value(r, c));
        peak = std::max(peak, std::fabs(outs[t].value(r, c)));
        propagated += w * outs[t].bound(r, c);
      }
      out.value(r, c) = value;
      out.bound(r, c) = propagated + grow(2 * e_lse) * magnitude +
                        kSafetyFactor * ((2 * exp_err + (2 * splits + 2) * kAccU + u_out) * magnitude +
                                         (splits * peak + 1) * kAccEta) +
                        eta(a.out);
    }
  }
  return out;
}

Bounded eval_combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a) {
  if (lses.empty()) throw Error("reference: combine needs at least one lse");
  const Eigen::Index rows = lses[0].value.rows();
  const double splits = static_cast<double>(lses.size());
  // As max + log(sum): log-sum-exp moves by at most the largest input error (it is
  // 1-Lipschitz in the max norm), so the max carries that bound; the sum carries the exp
  // error of each term and the T additions (docs/error-model.md, "combine").
  Bounded max = Bounded::exact(MatrixR::Constant(rows, 1, -kInf), DType::f32);
  Bounded sum = Bounded::exact(MatrixR::Zero(rows, 1), DType::f32);
  for (Eigen::Index r = 0; r < rows; ++r) {
    double top = -kInf, e_lse = 0;
    for (const Bounded& l : lses) {
      top = std::max(top, l.value(r, 0));
      if (l.value(r, 0) != -kInf) e_lse = std::max(e_lse, l.bound(r, 0));
    }
    if (top == -kInf) continue;  // every split empty: lse -inf
    double total = 0, exp_err = 0;
    for (const Bounded& l : lses) {
      if (l.value(r, 0) == -kInf) continue;
      const double w = std::exp(l.value(r, 0) - top);
      total += w;
      exp_err += w * exp_rel_error(l.value(r, 0) - top);
    }
    max.value(r, 0) = top;
    max.bound(r, 0) = e_lse;
    sum.value(r, 0) = total;
    sum.bound(r, 0) = kSafetyFactor * (exp_err + splits * kAccU * total + splits * kAccEta);
  }
  return eval_lse(max, sum, a);
}

}  // namespace fc

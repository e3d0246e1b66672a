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
// Keys summed per GEMM when the largest partial sum of P.V is tracked (eval_pv).
constexpr Eigen::Index kPrefixBlock = 64;

// The two bounds every evaluation carries: the worst case and the tight one.
enum class Variant { worst, tight };
constexpr Variant kVariants[] = {Variant::worst, Variant::tight};

const MatrixR& bound_of(const Bounded& b, Variant v) { return v == Variant::worst ? b.bound : b.tight; }
MatrixR& bound_of(Bounded& b, Variant v) { return v == Variant::worst ? b.bound : b.tight; }

// The tight bound never exceeds the worst-case one (for short sums lambda sqrt(n) > c n).
void cap_tight(Bounded& b) { b.tight = b.tight.cwiseMin(b.bound); }

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

// A round-to-nearest error is modelled as independent and uniform within its bound b, hence
// sub-Gaussian with variance proxy b^2/3: a sum of such errors exceeds lambda sqrt(sum b^2 / 3)
// with probability at most 2 exp(-lambda^2 / 2) (docs/error-model.md, "The tight bound").
const double kRoundingSpread = kTightLambda / std::sqrt(3.0);

// The tight rounding error of an fp32 sum of n terms whose partial sums all stay within
// `reach`: n round-to-nearest additions, each off by at most u times its partial sum; tensor
// cores truncate, a biased error of at most 10u of the reach per block of 16 products, which
// is counted in full.
double accumulation_tight(double n, double reach, const Arithmetic& a) {
  const double u = unit_roundoff(a.accumulate);
  double t = kRoundingSpread * u * std::sqrt(n) * reach;
  if (a.tensor_cores) t += kSafetyFactor * 10 * u * std::ceil(n / 16) * reach;
  return t;
}

// Additions of positive terms whose partial sums stay within `total`: the part of their
// rounding error that the probabilistic model cannot hold. A term below one ulp of the sum
// (t < 2u·total) is rounded the same way every time it recurs: a peaked row of thousands of
// nearly equal tiny terms added to a sum near 1 loses each of them, or rounds each of them up,
// all in one direction (stagnation). Its error is at most min(t, u·total), counted linearly.
double stagnation(double term, double total) { return term < 2 * kAccU * total ? std::min(term, kAccU * total) : 0.0; }

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

Bounded sized_like(const MatrixR& m, DType format) {
  Bounded b;
  b.value.resize(m.rows(), m.cols());
  b.bound.resize(m.rows(), m.cols());
  b.tight.resize(m.rows(), m.cols());
  b.format = format;
  return b;
}

Bounded constant(Eigen::Index rows, Eigen::Index cols, double value, double bound, DType format) {
  Bounded b;
  b.value = MatrixR::Constant(rows, cols, value);
  b.bound = MatrixR::Constant(rows, cols, bound);
  b.tight = b.bound;
  b.format = format;
  return b;
}

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
  b.tight = b.bound;
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

  Bounded out = sized_like(s, a.out);
  const double u_out = unit_roundoff(a.out), u_acc = accumulation_unit(a);
  const double underflow = (d + 1) * accumulation_floor(a) * std::max(1.0, in.scale);
  for (Eigen::Index r = 0; r < s.rows(); ++r) {
    for (Eigen::Index c = 0; c < s.cols(); ++c) {
      const double v = s(r, c);
      // A score that overflows the output format to -inf is stored as -inf: masked.
      if (v < 0 && std::isinf(round_to(a.out, v))) s(r, c) = -kInf;
      if (!std::isfinite(s(r, c))) {  // a masked score must be -inf exactly
        out.bound(r, c) = out.tight(r, c) = 0.0;
        continue;
      }
      const double softcap = cap > 0 ? kAccU * (2 * std::fabs(t(r, c)) + 4 * std::fabs(capped(r, c))) : 0.0;
      // The scale multiply, the softcap, the bias add and the final rounding: single operations.
      const double single = softcap + (kAccU + u_out) * std::fabs(v) + underflow;
      out.bound(r, c) = kSafetyFactor * ((d + 1) * u_acc * magnitude(r, c) + single) + eta(a.out);
      out.tight(r, c) = kSafetyFactor * single + accumulation_tight(d + 1, magnitude(r, c), a) + eta(a.out);
    }
  }
  out.value = std::move(s);
  cap_tight(out);
  return out;
}

SoftmaxResult eval_softmax(const Bounded& scores, const Arithmetic& a) {
  const MatrixR& s = scores.value;
  const Eigen::Index rows = s.rows(), cols = s.cols();
  SoftmaxResult res;
  res.p = constant(rows, cols, 0, eta(a.out), a.out);
  res.max = constant(rows, 1, -kInf, 0, scores.format);
  res.sum = constant(rows, 1, 0, eta(DType::f32), DType::f32);
  const double u_out = unit_roundoff(a.out);

  for (Eigen::Index r = 0; r < rows; ++r) {
    const double m = s.row(r).maxCoeff();
    if (m == -kInf) continue;  // fully masked row: the convention above
    double l = 0, n = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      l += std::exp(s(r, c) - m);
      n += 1;
    }
    const double log_l = std::log(l);
    double weighted_exp_err = 0;  // sum_k p_k * exp error of term k
    double stagnated = 0;         // relative to l
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double p = std::exp(s(r, c) - m) / l;
      res.p.value(r, c) = p;
      weighted_exp_err += p * exp_rel_error(s(r, c) - m);
      stagnated += stagnation(p, 1.0);
    }
    res.max.value(r, 0) = m;
    res.sum.value(r, 0) = l;
    // p = exp / l: the n additions of l (positive terms: every partial sum within l) and the
    // division, relative to p.
    const double sum_worst = kSafetyFactor * (n + 2) * kAccU;
    const double sum_tight = kSafetyFactor * (2 * kAccU + stagnated) + accumulation_tight(n + 1, 1.0, {});
    for (Variant v : kVariants) {
      const MatrixR& in_bound = bound_of(scores, v);
      const double e_max = max_shift(cols, [&](Eigen::Index c) { return std::pair(s(r, c), in_bound(r, c)); });
      // How far the errors move ln sum_k p_k e^{d_k}, the normalization's share of ln p_j.
      const double e_norm =
          weighted_log_shift(cols, [&](Eigen::Index c) { return std::pair(s(r, c) - m - log_l, in_bound(r, c)); });
      const double rounding = v == Variant::worst ? sum_worst : sum_tight;
      double sum_propagated = 0;
      for (Eigen::Index c = 0; c < cols; ++c) {
        if (s(r, c) == -kInf) continue;
        const double x = s(r, c) - m, p = res.p.value(r, c);
        const double propagated = within_range(exp_growth(p, x - log_l, in_bound(r, c) + e_norm), p, 0, 1);
        const double single = p * (exp_rel_error(x) + weighted_exp_err + u_out) + 2 * kAccEta;
        bound_of(res.p, v)(r, c) = propagated + kSafetyFactor * single + p * rounding + eta(a.out);
        sum_propagated += exp_growth(std::exp(x), x, in_bound(r, c) + e_max);
      }
      bound_of(res.max, v)(r, 0) = e_max;
      const double additions =
          v == Variant::worst ? kSafetyFactor * n * kAccU : kSafetyFactor * stagnated + accumulation_tight(n + 1, 1.0, {});
      // The sum relative to its own max lies in [1, n] whatever the scores.
      bound_of(res.sum, v)(r, 0) = within_range(sum_propagated, l, 1, n) +
                                   kSafetyFactor * (l * weighted_exp_err + n * kAccEta) + l * additions +
                                   eta(DType::f32);
    }
  }
  cap_tight(res.p);
  cap_tight(res.max);
  cap_tight(res.sum);
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
  res.p_tilde = constant(rows, cols, 0, eta(a.out), a.out);
  res.max = sized_like(MatrixR(rows, 1), DType::f32);
  res.sum = sized_like(MatrixR(rows, 1), DType::f32);
  res.rescale = sized_like(MatrixR(rows, 1), DType::f32);

  for (Eigen::Index r = 0; r < rows; ++r) {
    const double mp = prev_max.value(r, 0), lp = prev_sum.value(r, 0);
    const double mn = std::max(mp, s.row(r).maxCoeff());
    res.max.value(r, 0) = mn;
    if (mn == -kInf) {  // nothing attended yet
      res.rescale.value(r, 0) = 0;
      res.sum.value(r, 0) = 0;
      for (Variant v : kVariants) {
        bound_of(res.max, v)(r, 0) = 0;
        bound_of(res.rescale, v)(r, 0) = 0;
        bound_of(res.sum, v)(r, 0) = eta(DType::f32);
      }
      continue;
    }
    const double rr = mp == -kInf ? 0.0 : std::exp(mp - mn);
    const double r_local = mp == -kInf ? 0.0 : exp_rel_error(mp - mn);
    res.rescale.value(r, 0) = rr;

    double tile_sum = 0, tile_exp_err = 0, n = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) == -kInf) continue;
      const double x = s(r, c) - mn;
      const double pt = std::exp(x);
      res.p_tilde.value(r, c) = pt;
      tile_sum += pt;
      tile_exp_err += pt * exp_rel_error(x);
      n += 1;
    }
    const double l = rr * lp + tile_sum;
    res.sum.value(r, 0) = l;
    double stagnated = 0;
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (s(r, c) != -kInf) stagnated += stagnation(res.p_tilde.value(r, c), l);
    }

    for (Variant v : kVariants) {
      const MatrixR& in_bound = bound_of(scores_tile, v);
      const double e_prev_max = bound_of(prev_max, v)(r, 0), e_prev_sum = bound_of(prev_sum, v)(r, 0);
      // A max of perturbed values moves by at most the largest perturbation of those that can be the max.
      const double e_max = max_shift(cols + 1, [&](Eigen::Index c) {
        return c == cols ? std::pair(mp, e_prev_max) : std::pair(s(r, c), in_bound(r, c));
      });
      bound_of(res.max, v)(r, 0) = e_max;
      // r and p~ lie in [0, 1]: exp of a value minus a max at least as large.
      const double r_propagated =
          mp == -kInf ? 0.0 : within_range(exp_growth(rr, mp - mn, e_prev_max + e_max), rr, 0, 1);
      bound_of(res.rescale, v)(r, 0) = r_propagated + kSafetyFactor * (rr * r_local + kAccEta) + eta(DType::f32);

      double tile_propagated = 0;
      for (Eigen::Index c = 0; c < cols; ++c) {
        if (s(r, c) == -kInf) continue;
        const double x = s(r, c) - mn, pt = res.p_tilde.value(r, c);
        const double propagated = within_range(exp_growth(pt, x, in_bound(r, c) + e_max), pt, 0, 1);
        bound_of(res.p_tilde, v)(r, c) =
            propagated + kSafetyFactor * (pt * (exp_rel_error(x) + u_out) + kAccEta) + eta(a.out);
        tile_propagated += propagated;
      }
      // |r' l_p' - r l_p| <= r E(l_p) + l_p E(r) + E(r) E(l_p): the product of two uncertain values.
      const double propagated = rr * e_prev_sum + lp * r_propagated + r_propagated * e_prev_sum + tile_propagated;
      // The tile sum may be formed from p~ as stored (u_out), as a kernel that sums after
      // converting to the GEMM operand format does. Its n + 1 additions of positive terms stay
      // within l.
      const double single = rr * lp * (r_local + kAccU) + lp * kAccEta + tile_exp_err + u_out * tile_sum +
                            (n + 1) * kAccEta;
      const double additions =
          v == Variant::worst ? kSafetyFactor * (n + 1) * kAccU * l
                              : kSafetyFactor * stagnated + accumulation_tight(n + 1, l, {});
      bound_of(res.sum, v)(r, 0) = propagated + kSafetyFactor * single + additions + eta(DType::f32);
    }
  }
  cap_tight(res.p_tilde);
  cap_tight(res.max);
  cap_tight(res.sum);
  cap_tight(res.rescale);
  return res;
}

Bounded eval_rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                     const Arithmetic& a) {
  require_same_rows(acc.value, prev_max.value, "rescale");
  require_same_rows(acc.value, new_max.value, "rescale");
  const double u_out = unit_roundoff(a.out);
  Bounded out = sized_like(acc.value, a.out);
  for (Eigen::Index r = 0; r < acc.value.rows(); ++r) {
    const double mp = prev_max.value(r, 0), mn = new_max.value(r, 0);
    const bool defined = mp != -kInf && mn != -kInf;
    const double rr = defined ? std::exp(mp - mn) : 0.0;
    const double local_rel = (defined ? exp_rel_error(mp - mn) : 0.0) + kAccU + u_out;
    for (Eigen::Index c = 0; c < acc.value.cols(); ++c) out.value(r, c) = rr * acc.value(r, c);
    for (Variant v : kVariants) {
      const double r_propagated =
          defined ? within_range(exp_growth(rr, mp - mn, bound_of(prev_max, v)(r, 0) + bound_of(new_max, v)(r, 0)), rr,
                                 0, 1)
                  : 0.0;
      const MatrixR& in_bound = bound_of(acc, v);
      for (Eigen::Index c = 0; c < acc.value.cols(); ++c) {
        const double x = std::fabs(acc.value(r, c));
        // r itself may underflow: an absolute kAccEta on r, times |acc|.
        bound_of(out, v)(r, c) = rr * in_bound(r, c) + x * r_propagated + r_propagated * in_bound(r, c) +
                                 kSafetyFactor * (rr * x * local_rel + (x + 1) * kAccEta) + eta(a.out);
      }
    }
  }
  cap_tight(out);
  return out;
}

Bounded eval_pv(const Bounded& p, const MatrixR& v_rows, const Bounded* acc, const Arithmetic& a) {
  if (p.value.cols() != v_rows.rows()) throw Error("reference: p and v disagree in key count");
  const Eigen::Index keys = v_rows.rows();
  const double n = static_cast<double>(keys);
  const double u_out = unit_roundoff(a.out);
  const double u_p = operand_rounding(a, p.format);
  // Rounding p to a narrow operand loses up to half its smallest subnormal per element.
  const double eta_p = u_p > 0 ? eta(a.operand) : 0.0;
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
  // A range of keys summed in any contiguous order is a difference of two prefixes.
  const MatrixR range = 2 * reach;

  const double underflow = n * accumulation_floor(a);
  const Eigen::RowVectorXd operand_floor = eta_p * v_abs.colwise().sum();
  const MatrixR single = u_out * out.value.cwiseAbs().array() + underflow;  // the final rounding

  out.bound = p.bound * v_abs;
  if (acc) out.bound += acc->bound;
  out.bound.array() += kSafetyFactor * ((n + 2) * accumulation_unit(a) * accumulated.array() + u_p * magnitude.array() +
                                        operand_floor.replicate(out.value.rows(), 1).array() + single.array()) +
                       eta(a.out);

  // Tight: the accumulation at its probabilistic size over the reach; rounding p to the operand
  // format is one independent error per product, so those add in quadrature.
  out.tight = p.tight * v_abs;
  if (acc) out.tight += acc->tight;
  const MatrixR accumulation = range.unaryExpr([&](double x) { return accumulation_tight(n + 2, x, a); });
  out.tight.array() += kSafetyFactor * single.array() + accumulation.array() + eta(a.out);
  if (u_p > 0) {
    const MatrixR squares = p.value.cwiseAbs2() * v_rows.cwiseAbs2();
    const Eigen::RowVectorXd v_norm = v_rows.cwiseAbs2().colwise().sum().cwiseSqrt();
    out.tight.array() += kRoundingSpread * (u_p * squares.array().sqrt() +
                                            eta_p * v_norm.replicate(out.value.rows(), 1).array());
  }
  cap_tight(out);
  return out;
}

Bounded eval_normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a) {
  require_same_rows(acc.value, sum.value, "normalize");
  const double u_out = unit_roundoff(a.out);
  Bounded out = constant(acc.value.rows(), acc.value.cols(), 0, eta(a.out), a.out);
  for (Eigen::Index r = 0; r < acc.value.rows(); ++r) {
    const double l = sum.value(r, 0);
    if (l == 0) continue;  // fully masked row: output 0
    for (Eigen::Index c = 0; c < acc.value.cols(); ++c) out.value(r, c) = acc.value(r, c) / l;
    for (Variant v : kVariants) {
      const double e_l = bound_of(sum, v)(r, 0);
      // acc'/l' - acc/l = ((acc' - acc) - o (l' - l)) / l', and a sum relative to its own max
      // is at least 1: l' >= max(l - E(l), 1).
      const double least_sum = std::max(l - e_l, 1.0);
      for (Eigen::Index c = 0; c < acc.value.cols(); ++c) {
        const double o = out.value(r, c);
        bound_of(out, v)(r, c) = (bound_of(acc, v)(r, c) + std::fabs(o) * e_l) / least_sum +
                                 kSafetyFactor * ((2 * kAccU + u_out) * std::fabs(o) + kAccEta) + eta(a.out);
      }
    }
  }
  cap_tight(out);
  return out;
}

Bounded eval_lse(const Bounded& max, const Bounded& sum, const Arithmetic& a) {
  require_same_rows(max.value, sum.value, "lse");
  const double u_out = unit_roundoff(a.out);
  Bounded out = sized_like(max.value, a.out);
  for (Eigen::Index r = 0; r < max.value.rows(); ++r) {
    const double m = max.value(r, 0), l = sum.value(r, 0);
    if (l == 0 || m == -kInf) {
      out.value(r, 0) = -kInf;
      out.bound(r, 0) = out.tight(r, 0) = 0;
      continue;
    }
    const double lse = m + std::log(l);
    out.value(r, 0) = lse;
    // log in fp32 is good to a few ulp of its result; the add rounds once more.
    const double local = kAccU * (std::fabs(m) + 4 * std::fabs(std::log(l)) + 4) + (kAccU + u_out) * std::fabs(lse);
    for (Variant v : kVariants) {
      // l' lies in [max(l - E(l), 1), l + E(l)]: a sum relative to its own max is at least 1.
      const double e_l = bound_of(sum, v)(r, 0);
      const double log_moved = std::max(std::log1p(e_l / l), std::log(l) - std::log(std::max(l - e_l, 1.0)));
      bound_of(out, v)(r, 0) = bound_of(max, v)(r, 0) + log_moved + kSafetyFactor * local + eta(a.out);
    }
  }
  cap_tight(out);
  return out;
}

Bounded eval_combine(const std::vector<Bounded>& outs, const std::vector<Bounded>& lses,
                     const Arithmetic& a) {
  if (outs.empty() || outs.size() != lses.size()) throw Error("reference: combine needs one lse per partial");
  const Eigen::Index rows = outs[0].value.rows(), cols = outs[0].value.cols();
  const double splits = static_cast<double>(outs.size());
  const double u_out = unit_roundoff(a.out);
  Bounded out = constant(rows, cols, 0, eta(a.out), a.out);
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
    for (Eigen::Index c = 0; c < cols; ++c) {
      double value = 0;
      for (std::size_t t = 0; t < outs.size(); ++t) {
        if (lses[t].value(r, 0) != -kInf) value += std::exp(lses[t].value(r, 0) - top) / total * outs[t].value(r, c);
      }
      out.value(r, c) = value;
    }
    for (Variant v : kVariants) {
      const double e_norm = weighted_log_shift(count, [&](Eigen::Index t) {
        return std::pair(log_weight(t), bound_of(lses[static_cast<std::size_t>(t)], v)(r, 0));
      });
      for (Eigen::Index c = 0; c < cols; ++c) {
        double magnitude = 0, propagated = 0, peak = 0, weights_moved = 0;
        for (std::size_t t = 0; t < outs.size(); ++t) {
          if (lses[t].value(r, 0) == -kInf) continue;
          const double w = std::exp(lses[t].value(r, 0) - top) / total, o = outs[t].value(r, c);
          const double e_o = bound_of(outs[t], v)(r, c);
          magnitude += w * std::fabs(o);
          peak = std::max(peak, std::fabs(o));
          propagated += w * e_o;
          const double moved =
              exp_growth(w, log_weight(static_cast<Eigen::Index>(t)), bound_of(lses[t], v)(r, 0) + e_norm);
          // w' o' - w o = w (o' - o) + (w' - w) o + (w' - w)(o' - o)
          weights_moved += within_range(moved, w, 0, 1) * (std::fabs(o) + e_o);
        }
        // The weights' exp errors and the fp32 sum scale with the terms; the one final rounding
        // to the output format with the result.
        bound_of(out, v)(r, c) = propagated + weights_moved +
                                 kSafetyFactor * ((2 * exp_err + (2 * splits + 2) * kAccU) * magnitude +
                                                  u_out * std::fabs(out.value(r, c)) + (splits * peak + 1) * kAccEta) +
                                 eta(a.out);
      }
    }
  }
  cap_tight(out);
  return out;
}

Bounded eval_combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a) {
  if (lses.empty()) throw Error("reference: combine needs at least one lse");
  const Eigen::Index rows = lses[0].value.rows(), count = static_cast<Eigen::Index>(lses.size());
  const double u_out = unit_roundoff(a.out);
  Bounded out = constant(rows, 1, -kInf, 0, a.out);
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
    // The sum of T exps, its log and the add round.
    const double local = exp_err + (static_cast<double>(count) + 1) * kAccU +
                         kAccU * (std::fabs(top) + 4 * std::fabs(log_total) + 4) + (kAccU + u_out) * std::fabs(lse);
    out.value(r, 0) = lse;
    for (Variant v : kVariants) {
      // ln sum_t e^{lse_t + d_t} moves by ln sum_t w_t e^{d_t}.
      const double propagated = weighted_log_shift(count, [&](Eigen::Index t) {
        const Bounded& l = lses[static_cast<std::size_t>(t)];
        return std::pair(l.value(r, 0) - top - log_total, bound_of(l, v)(r, 0));
      });
      bound_of(out, v)(r, 0) = propagated + kSafetyFactor * local + eta(a.out);
    }
  }
  cap_tight(out);
  return out;
}


}  // namespace fc

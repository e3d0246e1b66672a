#pragma once
// The element and row arithmetic of every stage evaluation: the FP64 value and both error
// bounds (worst case, tight) of each element, written once for the host (the Eigen reference,
// stage_eval.cpp) and the device (the GPU reference, reference/gpu/). The matrix products
// around it (q k^T, p v and their magnitudes) are each side's own GEMMs.
//
// A row is processed by a Team of threads that split its columns (column c goes to rank
// c mod size) and reduce sums and maxima together: one thread on the host (SerialTeam), a
// warp on the device, or a whole block for rows of 512 keys or more. Every quantity depends
// only on the team's reductions, so the two differ only in the order of their sums
// (docs/error-model.md derives every term).
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace fc::stage_math {

// The one safety factor on rounding terms (docs/error-model.md, "The constant c").
inline constexpr double kSafetyFactor = 2.0;
// lambda of the tight bound: each of its probabilistic terms fails with probability at most
// 2 exp(-lambda^2 / 2) = 3.9e-22 (docs/error-model.md, "The tight bound").
inline constexpr double kTightLambda = 10.0;
// Unit roundoff of fp32 accumulation, 2^-24.
inline constexpr double kAccU = 5.9604644775390625e-08;
// Absolute error floor of one fp32 operation: results below the smallest normal number may
// be flushed to zero (GPU fast math, ex2.approx.ftz), so 2^-126 rather than half a subnormal.
inline constexpr double kAccEta = 1.1754943508222875e-38;
// A round-to-nearest error is modelled as independent and uniform within its bound b, hence
// sub-Gaussian with variance proxy b^2/3: a sum of such errors exceeds lambda sqrt(sum b^2 / 3)
// with probability at most 2 exp(-lambda^2 / 2) (docs/error-model.md, "The tight bound").
inline constexpr double kRoundingSpread = kTightLambda / 1.7320508075688772;

FC_HOST_DEVICE inline double infinity() { return HUGE_VAL; }
// The classification of std::isinf and std::isfinite, callable on the device too (the
// standard library's are constexpr host functions there).
FC_HOST_DEVICE inline bool is_inf(double x) { return x == infinity() || x == -infinity(); }
FC_HOST_DEVICE inline bool is_finite(double x) { return x == x && !is_inf(x); }
// std::max and std::min exactly (the first argument wins a tie or a NaN comparison).
FC_HOST_DEVICE inline double larger(double a, double b) { return a < b ? b : a; }
FC_HOST_DEVICE inline double smaller(double a, double b) { return b < a ? b : a; }
// The larger of a and b, NaN when either is: a row max that a NaN score makes NaN, so that a
// NaN input reaches every quantity of its row (a divergence whose cause is the input).
FC_HOST_DEVICE inline double nan_max(double a, double b) { return a != a || b != b ? a + b : larger(a, b); }

// The two bounds every evaluation carries, indexed 0 (worst case) and 1 (tight).
inline constexpr int kWorst = 0, kTight = 1;

// One row of a bounded tensor (a per-row quantity: its one element). An exact input (a
// kernel's own values, a constant) has no bound matrices: null, every error 0.
struct RowIn {
  const double* value;
  const double* bound[2];
  FC_HOST_DEVICE double error(int v, std::int64_t c = 0) const { return bound[v] ? bound[v][c] : 0.0; }
};
struct RowOut {
  double* value;
  double* bound[2];
};

// A team's max must give every member the same result, NaN included (nan_max).
struct SerialTeam {
  FC_HOST_DEVICE int rank() const { return 0; }
  FC_HOST_DEVICE int size() const { return 1; }
  FC_HOST_DEVICE bool leader() const { return true; }
  FC_HOST_DEVICE double sum(double x) const { return x; }
  FC_HOST_DEVICE double max(double x) const { return x; }
};

// Relative error of exp(x) as a kernel computes it in fp32 from x = s - m: the subtraction
// (|x| u), the argument scaling of exp2-based and fast exp (about 2|x| u) and the exp itself
// (a few ulp). docs/error-model.md, "exp".
FC_HOST_DEVICE inline double exp_rel_error(double x) { return (4.0 + 4.0 * std::fabs(x)) * kAccU; }

// The rounding of a matmul's accumulation: unit roundoff u of its format; tensor cores
// truncate (docs/error-model.md, "Tensor cores").
struct Accumulation {
  double u = kAccU;
  bool tensor_cores = false;

  // The tight rounding error of a sum of n terms whose partial sums all stay within `reach`:
  // n round-to-nearest additions, each off by at most u times its partial sum; tensor cores
  // truncate, a biased error of at most 10u of the reach per block of 16 products, which is
  // counted in full.
  FC_HOST_DEVICE double tight(double n, double reach) const {
    double t = kRoundingSpread * u * std::sqrt(n) * reach;
    if (tensor_cores) t += kSafetyFactor * 10 * u * std::ceil(n / 16) * reach;
    return t;
  }
};

// Additions of positive terms whose partial sums stay within `total`: the part of their
// rounding error that the probabilistic model cannot hold. A term below one ulp of the sum
// (t < 2u·total) is rounded the same way every time it recurs (stagnation). Its error is at
// most min(t, u·total), counted linearly.
FC_HOST_DEVICE inline double stagnation(double term, double total) {
  return term < 2 * kAccU * total ? smaller(term, kAccU * total) : 0.0;
}

// value * (e^e - 1) for value = e^{log_value}: what an error e of its log moves a positive
// value; computed from the log where the value underflowed, inf where it overflows.
FC_HOST_DEVICE inline double exp_growth(double value, double log_value, double e) {
  if (!(e > 0)) return 0;
  if (value > 0) return value * std::expm1(e);
  return std::exp(log_value + e);
}

// A bound on |x' - x| when both lie in [lo, hi].
FC_HOST_DEVICE inline double within_range(double bound, double x, double lo, double hi) {
  return smaller(bound, larger(x - lo, hi - x));
}

// An entry of a row under error: its value x and the bound e on its error.
struct Perturbed {
  double x, e;
};
// Entry c of a row under bound v.
struct RowEntries {
  RowIn s;
  int v;
  FC_HOST_DEVICE Perturbed operator()(std::int64_t c) const { return {s.value[c], s.error(v, c)}; }
};

// ---- Weights of a softmax under score errors (docs/error-model.md, "Finite masking biases").
// A score with a finite but huge masking bias carries an absolute bound far beyond any other
// of its row. Only scores that can be the row's max move the max; an error moves each weight
// in proportion to that weight; and a weight stays in [0, 1] whatever its inputs.

// How far max_k (x_k + d_k), |d_k| <= e_k, can lie from max_k x_k: the largest e_k among the
// entries that can be the max, x_k + e_k >= max_j (x_j - e_j); -inf entries take no part.
// The largest e_k of the entries that reach `lower` (x_k + e_k >= lower): max_shift's second
// half, which the online softmax's phases also take at other lower ends.
template <class Team, class Entry>
FC_HOST_DEVICE double shift_reaching(const Team& team, std::int64_t n, Entry entry, double lower) {
  double shift = 0;
  for (std::int64_t k = team.rank(); k < n; k += team.size()) {
    const Perturbed p = entry(k);
    if (p.x != -infinity() && p.x + p.e >= lower) shift = larger(shift, p.e);
  }
  return team.max(shift);
}
template <class Team, class Entry>
FC_HOST_DEVICE double max_shift(const Team& team, std::int64_t n, Entry entry) {
  double lower = -infinity();
  for (std::int64_t k = team.rank(); k < n; k += team.size()) {
    const Perturbed p = entry(k);
    if (p.x != -infinity()) lower = larger(lower, p.x - p.e);
  }
  return shift_reaching(team, n, entry, team.max(lower));
}

// ln sum_k w_k e^{e_k} for weights w_k = e^{log w_k} summing to 1: how far errors |d_k| <= e_k
// can move ln sum_k w_k e^{d_k} (Jensen both ways). `entry(k)` gives (log w_k, e_k); inf when
// it overflows. Formed as log1p(sum_k w_k expm1(e_k)), which keeps a small result accurate
// relative to itself (top + log(sum) of the shifted terms cancels to it from O(1) parts),
// except where a term could overflow, which takes the shifted form.
template <class Team, class Entry>
FC_HOST_DEVICE double weighted_log_shift(const Team& team, std::int64_t n, Entry entry) {
  double top = -infinity();
  for (std::int64_t k = team.rank(); k < n; k += team.size()) {
    const Perturbed p = entry(k);
    if (p.x != -infinity()) top = larger(top, p.x + p.e);
  }
  top = team.max(top);
  if (top == -infinity() || is_inf(top)) return top == -infinity() ? 0.0 : infinity();
  const bool shifted = top > 600;  // e^top would approach the double range
  double sum = 0;
  for (std::int64_t k = team.rank(); k < n; k += team.size()) {
    const Perturbed p = entry(k);
    if (p.x == -infinity()) continue;
    if (shifted) {
      sum += std::exp(p.x + p.e - top);
    } else {  // w (e^e - 1); past e = 1 the difference no longer cancels, and expm1 may overflow
      sum += p.e > 1 ? std::exp(p.x + p.e) - std::exp(p.x) : std::exp(p.x) * std::expm1(p.e);
    }
  }
  sum = team.sum(sum);
  return larger(0.0, shifted ? top + std::log(sum) : std::log1p(sum));
}

// ---- qk: scale * q k^T + bias, or with a softcap c, c tanh(scale q k^T / c) + bias.
struct QkTerms {
  double softcap = 0;       // c, 0 for none
  double u_out = 0;         // unit roundoff of the stored score
  double u_acc = 0;         // of one accumulation step (2u with tensor cores)
  double products = 0;      // D + 1: the dot product's additions and the scale
  double underflow = 0;     // (D + 1) accumulation floors, times max(1, scale)
  double eta_out = 0;       // rounding near zero in the stored format
  double overflow = 0;      // |s| from which the stored format holds inf
  Accumulation accumulation;
};

// One score from the scaled dot product t = scale q.k, its magnitude scale sum |q||k| (as the
// accumulation sees it) and the mask bias.
FC_HOST_DEVICE inline void qk_element(double t, double magnitude, double bias, const QkTerms& k, double* value,
                                      double* bound, double* tight) {
  const double capped = k.softcap > 0 ? k.softcap * std::tanh(t / k.softcap) : t;
  double v = capped + bias;
  // A score that overflows the output format to -inf is stored as -inf: masked.
  if (v < 0 && -v >= k.overflow) v = -infinity();
  *value = v;
  if (!is_finite(v)) {  // a masked score must be -inf exactly
    *bound = *tight = 0.0;
    return;
  }
  // Softcap (docs/error-model.md, "qk"): c tanh(t / c) has derivative sech^2 <= 1, so the dot
  // product's error passes at most 1:1; the argument t / c rounds (2 u |t| after the tanh),
  // the tanh (tanhf, 2 ulp) and the multiply by c round relative to the capped score.
  const double softcap = k.softcap > 0 ? kAccU * (2 * std::fabs(t) + 4 * std::fabs(capped)) : 0.0;
  // The scale multiply, the softcap, the bias add and the final rounding: single operations.
  const double single = softcap + (kAccU + k.u_out) * std::fabs(v) + k.underflow;
  *bound = kSafetyFactor * (k.products * k.u_acc * magnitude + single) + k.eta_out;
  *tight = smaller(kSafetyFactor * single + k.accumulation.tight(k.products, magnitude) + k.eta_out, *bound);
}

// The rounding of a stage's stored result: unit roundoff and rounding near zero of its
// output format, and rounding near zero of fp32 (row sums and factors are fp32).
struct OutputTerms {
  double u_out = 0, eta_out = 0, eta_f32 = 0;
};

// The largest score of a row, NaN when a score is (nan_max), -inf when every one is masked.
template <class Team>
FC_HOST_DEVICE double row_max(const Team& team, std::int64_t cols, const double* x) {
  double m = -infinity();
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) m = nan_max(m, x[c]);
  return team.max(m);
}

// The probabilities of a row with nothing attended: 0, off by at most rounding near zero.
template <class Team>
FC_HOST_DEVICE void unattended(const Team& team, std::int64_t cols, RowOut p, double eta_out) {
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    p.value[c] = 0;
    p.bound[kWorst][c] = p.bound[kTight][c] = eta_out;
  }
}

// ---- softmax over a whole row: p, the row max and the row sum of exp(s - max).

template <class Team>
FC_HOST_DEVICE void softmax_row(const Team& team, std::int64_t cols, RowIn s, RowOut p, RowOut max, RowOut sum,
                                const OutputTerms& k) {
  const double* x = s.value;
  const double m = row_max(team, cols, x);
  if (m == -infinity()) {  // fully masked row: probabilities 0, max -inf, sum 0
    unattended(team, cols, p, k.eta_out);
    if (team.leader()) {
      *max.value = -infinity();
      *max.bound[kWorst] = *max.bound[kTight] = 0;
      *sum.value = 0;
      *sum.bound[kWorst] = *sum.bound[kTight] = k.eta_f32;
    }
    return;
  }
  double l = 0, n = 0;
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    if (x[c] == -infinity()) continue;
    l += std::exp(x[c] - m);
    n += 1;
  }
  l = team.sum(l);
  n = team.sum(n);
  const double log_l = std::log(l);
  double weighted_exp_err = 0;  // sum_k p_k * exp error of term k
  double stagnated = 0;         // relative to l
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    if (x[c] == -infinity()) {
      p.value[c] = 0;
      continue;
    }
    const double pc = std::exp(x[c] - m) / l;
    p.value[c] = pc;
    weighted_exp_err += pc * exp_rel_error(x[c] - m);
    stagnated += stagnation(pc, 1.0);
  }
  weighted_exp_err = team.sum(weighted_exp_err);
  stagnated = team.sum(stagnated);
  // p = exp / l: the n additions of l (positive terms: every partial sum within l) and the
  // division, relative to p.
  const Accumulation fp32;
  const double sum_worst = kSafetyFactor * (n + 2) * kAccU;
  const double sum_tight = kSafetyFactor * (2 * kAccU + stagnated) + fp32.tight(n + 1, 1.0);
  for (int v = 0; v < 2; ++v) {
    const double e_max = max_shift(team, cols, RowEntries{s, v});
    // How far the errors move ln sum_k p_k e^{d_k}, the normalization's share of ln p_j.
    const double e_norm =
        weighted_log_shift(team, cols, [&](std::int64_t c) { return Perturbed{x[c] - m - log_l, s.error(v, c)}; });
    const double rounding = v == kWorst ? sum_worst : sum_tight;
    double sum_propagated = 0;
    for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
      if (x[c] == -infinity()) {
        p.bound[v][c] = k.eta_out;
        continue;
      }
      const double d = x[c] - m, pc = p.value[c];
      const double propagated = within_range(exp_growth(pc, d - log_l, s.error(v, c) + e_norm), pc, 0, 1);
      const double single = pc * (exp_rel_error(d) + weighted_exp_err + k.u_out) + 2 * kAccEta;
      p.bound[v][c] = propagated + kSafetyFactor * single + pc * rounding + k.eta_out;
      sum_propagated += exp_growth(std::exp(d), d, s.error(v, c) + e_max);
    }
    sum_propagated = team.sum(sum_propagated);
    const double additions =
        v == kWorst ? kSafetyFactor * n * kAccU : kSafetyFactor * stagnated + fp32.tight(n + 1, 1.0);
    if (team.leader()) {
      *max.bound[v] = e_max;
      // The sum relative to its own max lies in [1, n] whatever the scores.
      *sum.bound[v] = within_range(sum_propagated, l, 1, n) + kSafetyFactor * (l * weighted_exp_err + n * kAccEta) +
                      l * additions + k.eta_f32;
    }
  }
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    p.bound[kTight][c] = smaller(p.bound[kTight][c], p.bound[kWorst][c]);
  }
  if (team.leader()) {
    *max.value = m;
    *sum.value = l;
    *max.bound[kTight] = smaller(*max.bound[kTight], *max.bound[kWorst]);
    *sum.bound[kTight] = smaller(*sum.bound[kTight], *sum.bound[kWorst]);
  }
}

// ---- One tile of online softmax: given the running max and sum after the previous tile
// (-inf and 0 before the first), the new max, p~ = exp(s - max_new), the rescale factor
// r = exp(max_prev - max_new) and the new running sum r sum_prev + sum(p~).
//
// In phases, so that a row's tiles can be judged at once, only scalars carried from tile to
// tile (online_softmax_row runs them in order for one tile; the GPU reference runs each phase
// over every tile of a stack, the carries scanned row by row, reference/gpu/chain_kernels.cu):
//   1. online_tile_stats   (the tile alone)           the tile's max and what max_shift needs
//   2. online_max_step     (carry: the running max)   the new max and its error
//   3. online_tile_values  (the tile)                 p~, the max and rescale outputs, sums
//   4. online_sum_value    (carry: the running sum)   the new sum
//   5. online_stagnation   (the tile)                 the tight bound's stagnated additions
//   6. online_sum_step     (carry: the sum's errors)  the sum's bounds

// What max_shift over the tile's entries and the running max needs of the entries, per bound v:
// the largest x - e (the tile's lower end), the largest x + e, and the shift taken at
// shift_lower, the lower end as far as it was known (the tile's own, or with the running max
// before it where the caller knew it).
struct OnlineTileStats {
  double max;
  double lower[2], upper[2], shift_lower[2], shift[2];
};

// `carried_lower`: each bound's lower end of the running max before the tile (x - e of it, -inf
// when none or unknown).
template <class Team>
FC_HOST_DEVICE OnlineTileStats online_tile_stats(const Team& team, std::int64_t cols, RowIn s,
                                                 const double carried_lower[2]) {
  OnlineTileStats t;
  t.max = row_max(team, cols, s.value);
  for (int v = 0; v < 2; ++v) {
    double lower = -infinity(), upper = -infinity();
    for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
      const double x = s.value[c], e = s.error(v, c);
      if (x == -infinity()) continue;
      lower = larger(lower, x - e);
      upper = larger(upper, x + e);
    }
    t.lower[v] = team.max(lower);
    t.upper[v] = team.max(upper);
    t.shift_lower[v] = larger(t.lower[v], carried_lower[v]);
    t.shift[v] = shift_reaching(team, cols, RowEntries{s, v}, t.shift_lower[v]);
  }
  return t;
}

// A value carried from tile to tile with its errors as stored (tight at most worst): the
// running max (-inf before the first tile) and the running sum (0).
struct RunningValue {
  double value;
  double error[2];
};
using RunningMax = RunningValue;
using RunningSum = RunningValue;
// A tile's step of it: the max before (with its errors as stored) and after, and each bound's
// max_shift over the tile's entries and the running max before (the error the tile's values
// use; stored, the tight one is capped by the worst case's).
struct MaxStep {
  double prev, next;
  double prev_error[2];
  double shift[2];
  FC_HOST_DEVICE bool attended() const { return next != -infinity(); }
  FC_HOST_DEVICE RunningMax after() const {
    if (!attended()) return {next, {0, 0}};
    return {next, {shift[kWorst], smaller(shift[kTight], shift[kWorst])}};
  }
};

// The lower end of the running max as max_shift's entry (none before the first tile).
FC_HOST_DEVICE inline void carried_lower_ends(const RunningMax& prev, double lower[2]) {
  for (int v = 0; v < 2; ++v) lower[v] = prev.value != -infinity() ? prev.value - prev.error[v] : -infinity();
}

// max_shift over the tile's entries and the running max (its last entry) from the tile's
// stats; the tile's entries are read again only where the stats took the shift at a lower end
// the running max raises, and some entry can still reach it.
template <class Team>
FC_HOST_DEVICE MaxStep online_max_step(const Team& team, const RunningMax& prev, const OnlineTileStats& t,
                                       std::int64_t cols, RowIn s) {
  MaxStep m;
  m.prev = prev.value;
  m.next = nan_max(prev.value, t.max);
  m.prev_error[kWorst] = prev.error[kWorst];
  m.prev_error[kTight] = prev.error[kTight];
  m.shift[kWorst] = m.shift[kTight] = 0;
  if (!m.attended()) return m;
  double carried[2];
  carried_lower_ends(prev, carried);
  for (int v = 0; v < 2; ++v) {
    const double e_prev = prev.error[v];
    const double lower = larger(t.lower[v], carried[v]);
    double shift = t.shift[v];
    if (!(lower == t.shift_lower[v])) shift = t.upper[v] >= lower ? shift_reaching(team, cols, RowEntries{s, v}, lower) : 0.0;
    if (prev.value != -infinity() && prev.value + e_prev >= lower) shift = larger(shift, e_prev);
    m.shift[v] = shift;
  }
  return m;
}

// What a tile's values give the running sum's step.
struct OnlineTileSums {
  double rr = 0, r_local = 0;          // the rescale factor and its local relative error
  double tile_sum = 0, tile_exp_err = 0, n = 0;
  double r_propagated[2] = {0, 0};     // the rescale factor's propagated error
  double tile_propagated[2] = {0, 0};  // sum of p~'s propagated errors
};

// p~ with both bounds, and the max and rescale outputs (written by the leader).
template <class Team>
FC_HOST_DEVICE OnlineTileSums online_tile_values(const Team& team, std::int64_t cols, RowIn s, const MaxStep& m,
                                                 RowOut p, RowOut max, RowOut rescale, const OutputTerms& k) {
  OnlineTileSums out;
  const double* x = s.value;
  const double mp = m.prev, mn = m.next;
  if (!m.attended()) {  // nothing attended yet
    unattended(team, cols, p, k.eta_out);
    if (team.leader()) {
      *max.value = mn;
      *rescale.value = 0;
      for (int v = 0; v < 2; ++v) {
        *max.bound[v] = 0;
        *rescale.bound[v] = 0;
      }
    }
    return out;
  }
  out.rr = mp == -infinity() ? 0.0 : std::exp(mp - mn);
  out.r_local = mp == -infinity() ? 0.0 : exp_rel_error(mp - mn);
  double tile_sum = 0, tile_exp_err = 0, n = 0;
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    if (x[c] == -infinity()) {
      p.value[c] = 0;
      continue;
    }
    const double d = x[c] - mn;
    const double pt = std::exp(d);
    p.value[c] = pt;
    tile_sum += pt;
    tile_exp_err += pt * exp_rel_error(d);
    n += 1;
  }
  out.tile_sum = team.sum(tile_sum);
  out.tile_exp_err = team.sum(tile_exp_err);
  out.n = team.sum(n);
  for (int v = 0; v < 2; ++v) {
    const double e_max = m.shift[v];
    // r and p~ lie in [0, 1]: exp of a value minus a max at least as large.
    out.r_propagated[v] =
        mp == -infinity() ? 0.0 : within_range(exp_growth(out.rr, mp - mn, m.prev_error[v] + e_max), out.rr, 0, 1);
    double tile_propagated = 0;
    for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
      if (x[c] == -infinity()) {
        p.bound[v][c] = k.eta_out;
        continue;
      }
      const double d = x[c] - mn, pt = p.value[c];
      const double propagated = within_range(exp_growth(pt, d, s.error(v, c) + e_max), pt, 0, 1);
      p.bound[v][c] = propagated + kSafetyFactor * (pt * (exp_rel_error(d) + k.u_out) + kAccEta) + k.eta_out;
      tile_propagated += propagated;
    }
    out.tile_propagated[v] = team.sum(tile_propagated);
  }
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    p.bound[kTight][c] = smaller(p.bound[kTight][c], p.bound[kWorst][c]);
  }
  if (team.leader()) {
    const RunningMax after = m.after();
    *max.value = mn;
    *max.bound[kWorst] = after.error[kWorst];
    *max.bound[kTight] = after.error[kTight];
    *rescale.value = out.rr;
    for (int v = 0; v < 2; ++v) {
      *rescale.bound[v] = out.r_propagated[v] + kSafetyFactor * (out.rr * out.r_local + kAccEta) + k.eta_f32;
    }
    *rescale.bound[kTight] = smaller(*rescale.bound[kTight], *rescale.bound[kWorst]);
  }
  return out;
}

FC_HOST_DEVICE inline double online_sum_value(double prev_sum, const MaxStep& m, const OnlineTileSums& t) {
  return m.attended() ? t.rr * prev_sum + t.tile_sum : 0.0;
}

// The tile's additions that the tight bound counts linearly (stagnation) against the new sum l.
template <class Team>
FC_HOST_DEVICE double online_stagnation(const Team& team, std::int64_t cols, RowIn s, const double* p, double l) {
  double stagnated = 0;
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    if (s.value[c] != -infinity()) stagnated += stagnation(p[c], l);
  }
  return team.sum(stagnated);
}

// The running sum after the tile, l with both bounds, from the running sum before (its errors as
// stored) and the tile's sums.
FC_HOST_DEVICE inline RunningSum online_sum_step(const RunningSum& prev, const MaxStep& m, const OnlineTileSums& t,
                                                 double l, double stagnated, const OutputTerms& k) {
  RunningSum after{l, {k.eta_f32, k.eta_f32}};
  if (!m.attended()) return after;
  const double lp = prev.value, rr = t.rr, n = t.n;
  const Accumulation fp32;
  for (int v = 0; v < 2; ++v) {
    const double e_prev_sum = prev.error[v], r_propagated = t.r_propagated[v];
    // |r' l_p' - r l_p| <= r E(l_p) + l_p E(r) + E(r) E(l_p): the product of two uncertain values.
    const double propagated = rr * e_prev_sum + lp * r_propagated + r_propagated * e_prev_sum + t.tile_propagated[v];
    // The tile sum may be formed from p~ as stored (u_out), as a kernel that sums after
    // converting to the GEMM operand format does. Its n + 1 additions of positive terms stay
    // within l.
    const double single =
        rr * lp * (t.r_local + kAccU) + lp * kAccEta + t.tile_exp_err + k.u_out * t.tile_sum + (n + 1) * kAccEta;
    const double additions =
        v == kWorst ? kSafetyFactor * (n + 1) * kAccU * l : kSafetyFactor * stagnated + fp32.tight(n + 1, l);
    after.error[v] = propagated + kSafetyFactor * single + additions + k.eta_f32;
  }
  after.error[kTight] = smaller(after.error[kTight], after.error[kWorst]);
  return after;
}

template <class Team>
FC_HOST_DEVICE void online_softmax_row(const Team& team, std::int64_t cols, RowIn s, RowIn prev_max, RowIn prev_sum,
                                       RowOut p, RowOut max, RowOut sum, RowOut rescale,
                                       const OutputTerms& k) {
  const RunningMax pm{*prev_max.value, {prev_max.error(kWorst), prev_max.error(kTight)}};
  const RunningSum ps{*prev_sum.value, {prev_sum.error(kWorst), prev_sum.error(kTight)}};
  double carried[2];
  carried_lower_ends(pm, carried);  // known here: the tile's shift is taken at the final lower end
  const OnlineTileStats stats = online_tile_stats(team, cols, s, carried);
  const MaxStep m = online_max_step(team, pm, stats, cols, s);
  const OnlineTileSums t = online_tile_values(team, cols, s, m, p, max, rescale, k);
  const double l = online_sum_value(ps.value, m, t);
  const double stagnated = online_stagnation(team, cols, s, p.value, l);  // 0 for a tile attending nothing
  const RunningSum after = online_sum_step(ps, m, t, l, stagnated, k);
  if (team.leader()) {
    *sum.value = after.value;
    *sum.bound[kWorst] = after.error[kWorst];
    *sum.bound[kTight] = after.error[kTight];
  }
}

// ---- rescale: acc * exp(prev_max - new_max), one row of the accumulator; element by element
// from the row's factor (the GPU reference walks each element's tiles on its own thread).
struct RescaleFactor {
  double rr, local_rel;
  double propagated[2];  // the factor's propagated error, each bound
};

FC_HOST_DEVICE inline RescaleFactor rescale_factor(RowIn prev_max, RowIn new_max, const OutputTerms& k) {
  const double mp = *prev_max.value, mn = *new_max.value;
  const bool defined = mp != -infinity() && mn != -infinity();
  RescaleFactor f;
  f.rr = defined ? std::exp(mp - mn) : 0.0;
  f.local_rel = (defined ? exp_rel_error(mp - mn) : 0.0) + kAccU + k.u_out;
  for (int v = 0; v < 2; ++v) {
    f.propagated[v] =
        defined ? within_range(exp_growth(f.rr, mp - mn, prev_max.error(v) + new_max.error(v)), f.rr, 0, 1) : 0.0;
  }
  return f;
}

// One element: acc with its errors (worst, tight) into value and bound (worst, tight).
FC_HOST_DEVICE inline void rescale_element(const RescaleFactor& f, double acc, const double acc_error[2], double* value,
                                           double bound[2], const OutputTerms& k) {
  *value = f.rr * acc;
  for (int v = 0; v < 2; ++v) {
    const double x = std::fabs(acc), e = acc_error[v], r_propagated = f.propagated[v];
    // r itself may underflow: an absolute kAccEta on r, times |acc|.
    bound[v] = f.rr * e + x * r_propagated + r_propagated * e +
               kSafetyFactor * (f.rr * x * f.local_rel + (x + 1) * kAccEta) + k.eta_out;
  }
  bound[kTight] = smaller(bound[kTight], bound[kWorst]);
}

template <class Team>
FC_HOST_DEVICE void rescale_row(const Team& team, std::int64_t cols, RowIn acc, RowIn prev_max, RowIn new_max,
                                RowOut out, const OutputTerms& k) {
  const RescaleFactor f = rescale_factor(prev_max, new_max, k);
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    const double e[2] = {acc.error(kWorst, c), acc.error(kTight, c)};
    double bound[2];
    rescale_element(f, acc.value[c], e, out.value + c, bound, k);
    out.bound[kWorst][c] = bound[kWorst];
    out.bound[kTight][c] = bound[kTight];
  }
}

// ---- pv: the bounds of one element of p v (+ acc), from the products the GEMMs formed.
struct PvTerms {
  double keys = 0;          // n, the keys summed
  double u_acc = 0;         // of one accumulation step
  double u_out = 0;
  double u_operand = 0;     // rounding p to a narrower GEMM operand (0: none)
  double eta_operand = 0;   // that rounding's absolute floor
  double underflow = 0;     // n accumulation floors
  double eta_out = 0;
  Accumulation accumulation;
};

// What the GEMMs give one element: its value, the bounds propagated from p (E(p) |v|, both
// variants) and from acc, sum nu|p| nu|v| (+|acc|) ("accumulated"), the reach of every prefix,
// sum |p||v| (+|acc|) ("magnitude"), and for the operand rounding sum p^2 v^2 and the column's
// |v| sums.
struct PvElement {
  double value, accumulated, reach, magnitude;
  double propagated[2];
  double squares, operand_floor, v_norm;
};

FC_HOST_DEVICE inline void pv_element(const PvElement& x, const PvTerms& k, double* bound, double* tight) {
  const double single = k.u_out * std::fabs(x.value) + k.underflow;  // the final rounding
  *bound = x.propagated[kWorst] + (kSafetyFactor * ((k.keys + 2) * k.u_acc * x.accumulated + k.u_operand * x.magnitude +
                                                    x.operand_floor + single) +
                                   k.eta_out);
  // A range of keys summed in any contiguous order is a difference of two prefixes: 2 reach.
  double t = x.propagated[kTight] + (kSafetyFactor * single + k.accumulation.tight(k.keys + 2, 2 * x.reach) + k.eta_out);
  // Rounding p to the operand format is one independent error per product: in quadrature.
  if (k.u_operand > 0) t += kRoundingSpread * (k.u_operand * std::sqrt(x.squares) + k.eta_operand * x.v_norm);
  *tight = smaller(t, *bound);
}

// ---- normalize: acc / sum, one row (0 where the sum is 0).
template <class Team>
FC_HOST_DEVICE void normalize_row(const Team& team, std::int64_t cols, RowIn acc, RowIn sum, RowOut out,
                                  const OutputTerms& k) {
  const double l = *sum.value;
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    out.value[c] = l == 0 ? 0.0 : acc.value[c] / l;
    out.bound[kWorst][c] = out.bound[kTight][c] = k.eta_out;
  }
  if (l == 0) return;  // fully masked row: output 0
  for (int v = 0; v < 2; ++v) {
    const double e_l = sum.error(v);
    // acc'/l' - acc/l = ((acc' - acc) - o (l' - l)) / l', and a sum relative to its own max
    // is at least 1: l' >= max(l - E(l), 1).
    const double least_sum = larger(l - e_l, 1.0);
    for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
      const double o = out.value[c];
      out.bound[v][c] = (acc.error(v, c) + std::fabs(o) * e_l) / least_sum +
                        kSafetyFactor * ((2 * kAccU + k.u_out) * std::fabs(o) + kAccEta) + k.eta_out;
    }
  }
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    out.bound[kTight][c] = smaller(out.bound[kTight][c], out.bound[kWorst][c]);
  }
}

// ---- the range of an attention output. A kernel's output is sum_j w_j v_j, weights w_j >= 0
// summing to 1 up to their rounding: p rounded to the operand format (relative u_op and an
// absolute floor a weight), the accumulations of P.V and of the row sum (n roundings each),
// the rescales of both by each tile's factor, the division by the sum, a split's rounded
// partial and the output's own rounding, with products below the accumulation's floor
// flushed. Whatever errors its probabilities carry, each element lies within its column's
// [min v, max v] over the keys summed, widened by that rounding of max |v| (4n + 4 roundings of
// the accumulation bound the 2n of the two sums and the 2T of the rescales, T <= n tiles). An
// end-to-end bound reaching past the far end of that range is capped there (docs/error-model.md,
// "Finite masking biases"): without the cap, a row whose scores are all huge and alike (every
// key biased by float32's minimum) had a bound of about sum |v|, wide enough to pass any value.
// A combine whose weights do not sum to 1 (FlashAttention-2 scales each partial by
// exp(lse_t - lse) without dividing by their sum) fails there: its weights sum to the split
// count when every lse rounds to the same huge value.
struct RangeTerms {
  double keys = 0;         // n, the keys summed
  double u_acc = 0;        // of one accumulation step
  double u_operand = 0;    // rounding p to the P.V operand
  double eta_operand = 0;  // that rounding's absolute floor
  double underflow = 0;    // n accumulation floors
  double u_out = 0;        // of the output, and of a split's partial output
  double eta_out = 0;
};

FC_HOST_DEVICE inline double range_cap(double o, double v_min, double v_max, const RangeTerms& k) {
  const double widest = larger(std::fabs(v_min), std::fabs(v_max));
  const double relative = k.u_operand + (4 * k.keys + 4) * k.u_acc + 2 * k.u_out;
  const double rounding = (relative + k.keys * k.eta_operand) * widest + k.underflow + kAccEta;
  return larger(o - v_min, v_max - o) + kSafetyFactor * rounding + k.eta_out;
}

// ---- log-sum-exp of a row: max + log(sum) (-inf where the sum is 0).
FC_HOST_DEVICE inline void lse_element(RowIn max, RowIn sum, RowOut out, const OutputTerms& k) {
  const double m = *max.value, l = *sum.value;
  if (l == 0 || m == -infinity()) {
    *out.value = -infinity();
    *out.bound[kWorst] = *out.bound[kTight] = 0;
    return;
  }
  const double lse = m + std::log(l);
  *out.value = lse;
  // log in fp32 is good to a few ulp of its result; the add rounds once more.
  const double local = kAccU * (std::fabs(m) + 4 * std::fabs(std::log(l)) + 4) + (kAccU + k.u_out) * std::fabs(lse);
  for (int v = 0; v < 2; ++v) {
    // l' lies in [max(l - E(l), 1), l + E(l)]: a sum relative to its own max is at least 1.
    const double e_l = sum.error(v);
    // log(l) - log(l - E(l)) as -log1p(-E(l)/l): the difference of two logs cancels.
    const double log_moved = larger(std::log1p(e_l / l), l - e_l >= 1 ? -std::log1p(-e_l / l) : std::log(l));
    *out.bound[v] = max.error(v) + log_moved + kSafetyFactor * local + k.eta_out;
  }
  *out.bound[kTight] = smaller(*out.bound[kTight], *out.bound[kWorst]);
}

// ---- split-KV combine of normalized partial outputs by their log-sum-exp; a split whose
// every key is masked (lse = -inf) has weight 0. `part(t)` and `lse(t)` give split t's row.
template <class Team, class Part, class Lse>
FC_HOST_DEVICE void combine_row(const Team& team, std::int64_t cols, int splits, Part part, Lse lse, RowOut out,
                                const OutputTerms& k) {
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    out.value[c] = 0;
    out.bound[kWorst][c] = out.bound[kTight][c] = k.eta_out;
  }
  double top = -infinity();
  for (int t = 0; t < splits; ++t) top = larger(top, *lse(t).value);
  if (top == -infinity()) return;  // every split empty: fully masked row
  double total = 0, exp_err = 0;
  for (int t = 0; t < splits; ++t) {
    const double x = *lse(t).value;
    if (x == -infinity()) continue;
    total += std::exp(x - top);
    exp_err = larger(exp_err, exp_rel_error(x - top));
  }
  const double log_total = std::log(total);
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    double value = 0;
    for (int t = 0; t < splits; ++t) {
      const double x = *lse(t).value;
      if (x != -infinity()) value += std::exp(x - top) / total * part(t).value[c];
    }
    out.value[c] = value;
  }
  const double count = static_cast<double>(splits);
  const SerialTeam alone;  // the splits of one row, summed by each thread on its own
  for (int v = 0; v < 2; ++v) {
    const double e_norm = weighted_log_shift(alone, splits, [&](std::int64_t t) {
      const RowIn l = lse(static_cast<int>(t));
      return Perturbed{*l.value - top - log_total, l.error(v)};
    });
    for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
      double magnitude = 0, propagated = 0, peak = 0, weights_moved = 0;
      for (int t = 0; t < splits; ++t) {
        const RowIn l = lse(t), o_t = part(t);
        if (*l.value == -infinity()) continue;
        const double w = std::exp(*l.value - top) / total, o = o_t.value[c];
        const double e_o = o_t.error(v, c);
        magnitude += w * std::fabs(o);
        peak = larger(peak, std::fabs(o));
        propagated += w * e_o;
        const double moved = exp_growth(w, *l.value - top - log_total, l.error(v) + e_norm);
        // w' o' - w o = w (o' - o) + (w' - w) o + (w' - w)(o' - o)
        weights_moved += within_range(moved, w, 0, 1) * (std::fabs(o) + e_o);
      }
      // The weights' exp errors and the fp32 sum scale with the terms; the one final rounding
      // to the output format with the result.
      out.bound[v][c] = propagated + weights_moved +
                        kSafetyFactor * ((2 * exp_err + (2 * count + 2) * kAccU) * magnitude +
                                         k.u_out * std::fabs(out.value[c]) + (count * peak + 1) * kAccEta) +
                        k.eta_out;
    }
  }
  for (std::int64_t c = team.rank(); c < cols; c += team.size()) {
    out.bound[kTight][c] = smaller(out.bound[kTight][c], out.bound[kWorst][c]);
  }
}

// The log-sum-exp of the combined row, max_t lse_t + log(sum_t exp(lse_t - max_t lse_t))
// (-inf where every split is empty).
template <class Lse>
FC_HOST_DEVICE void combine_lse_element(int splits, Lse lse, RowOut out, const OutputTerms& k) {
  double top = -infinity();
  for (int t = 0; t < splits; ++t) top = larger(top, *lse(t).value);
  if (top == -infinity()) {  // every split empty
    *out.value = -infinity();
    *out.bound[kWorst] = *out.bound[kTight] = 0;
    return;
  }
  double total = 0, exp_err = 0;
  for (int t = 0; t < splits; ++t) {
    const double x = *lse(t).value;
    if (x == -infinity()) continue;
    total += std::exp(x - top);
    exp_err = larger(exp_err, exp_rel_error(x - top));
  }
  const double log_total = std::log(total), result = top + log_total;
  // The sum of T exps, its log and the add round.
  const double local = exp_err + (static_cast<double>(splits) + 1) * kAccU +
                       kAccU * (std::fabs(top) + 4 * std::fabs(log_total) + 4) + (kAccU + k.u_out) * std::fabs(result);
  *out.value = result;
  const SerialTeam alone;
  for (int v = 0; v < 2; ++v) {
    // ln sum_t e^{lse_t + d_t} moves by ln sum_t w_t e^{d_t}.
    const double propagated = weighted_log_shift(alone, splits, [&](std::int64_t t) {
      const RowIn l = lse(static_cast<int>(t));
      return Perturbed{*l.value - top - log_total, l.error(v)};
    });
    *out.bound[v] = propagated + kSafetyFactor * local + k.eta_out;
  }
  *out.bound[kTight] = smaller(*out.bound[kTight], *out.bound[kWorst]);
}

}  // namespace fc::stage_math

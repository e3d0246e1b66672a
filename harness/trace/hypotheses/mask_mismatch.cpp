// mask-mismatch: the kernel's masked pattern differs from the mask's. For key-indexed
// outputs a masked element is a -inf score or a zero probability; an element is explained
// when the kernel masks it and the reference does not, or the other way round. Scores are also
// tested for another head's or batch's mask (other_head_mask) and for a finite bias taken a
// wrong number of times (bias_factor). For output
// rows with no key to attend to (the reference's convention is 0), the kernel is tested for
// what a finite masking bias gives there: the uniform average of V, or attention with the
// mask ignored.
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool kernel_masked(const Diagnosis& d, double k) {
  return d.result.quantity == Quantity::scores ? k == -kInf : k == 0.0;
}

bool mask_allows(const Diagnosis& d, const BadElement& e) { return d.head.bias_at(e.row, e.col) != -kInf; }

// Where the elements lie: one diagonal (key - row - diagonal constant), a block, or spread.
std::string pattern_of(const Diagnosis& d, const std::vector<const BadElement*>& elements) {
  if (elements.empty()) return "";
  const std::int64_t diagonal = d.inputs.problem.diagonal_of(d.b);
  std::set<std::int64_t> offsets;
  std::int64_t r0 = elements.front()->row, r1 = r0, j0 = elements.front()->col, j1 = j0;
  for (const BadElement* e : elements) {
    offsets.insert(e->col - e->row - diagonal);
    r0 = std::min(r0, e->row);
    r1 = std::max(r1, e->row);
    j0 = std::min(j0, e->col);
    j1 = std::max(j1, e->col);
  }
  if (offsets.size() == 1) {
    const std::int64_t off = *offsets.begin();
    return "all on one diagonal, key = row + " + std::to_string(diagonal + off) + " (" +
           (off == 0 ? std::string("the causal diagonal itself")
                     : std::to_string(std::llabs(off)) + (off < 0 ? " left of" : " right of") + " the causal diagonal") +
           ")";
  }
  // Key columns against the batch's padding length L: keys L.. attended, or keys ..L-1 masked,
  // in every row they touch: the kernel used another length.
  const std::vector<std::int32_t>& lengths = d.inputs.problem.mask.key_lengths;
  if (!lengths.empty()) {
    const std::int64_t length = lengths[static_cast<std::size_t>(d.b)];
    if (j0 == length || j1 == length - 1) {
      const std::int64_t used = j0 == length ? j1 + 1 : j0;
      return "keys " + std::to_string(j0) + ".." + std::to_string(j1) + " of rows " + std::to_string(r0) + ".." +
             std::to_string(r1) + ": padding length " + std::to_string(used) + " used for batch " + std::to_string(d.b) +
             " (its length is " + std::to_string(length) + ")";
    }
  }
  if (static_cast<std::int64_t>(elements.size()) == (r1 - r0 + 1) * (j1 - j0 + 1)) {
    return "a block: rows " + std::to_string(r0) + ".." + std::to_string(r1) + ", keys " + std::to_string(j0) + ".." +
           std::to_string(j1);
  }
  // The key columns that hold them: one column per row at a fixed distance from the row's first key?
  return "rows " + std::to_string(r0) + ".." + std::to_string(r1) + ", keys " + std::to_string(j0) + ".." +
         std::to_string(j1);
}

Explanation masked_pattern(const Diagnosis& d) {
  std::vector<const BadElement*> extra, missing;
  std::map<double, std::size_t> missing_values;  // what the kernel holds where it should mask
  for (const BadElement& e : d.bad) {
    const bool allowed = mask_allows(d, e);
    const bool masked = kernel_masked(d, e.kernel);
    if (masked && allowed) extra.push_back(&e);
    if (!masked && !allowed) {
      missing.push_back(&e);
      ++missing_values[e.kernel];
    }
  }
  const std::size_t explained = extra.size() + missing.size();
  if (explained == 0) return {};
  std::string evidence = d.result.name + " is masked where the mask attends, or attended where it masks: " +
                         explained_text(d, explained) + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h);
  if (!extra.empty()) {
    evidence += "; " + std::to_string(extra.size()) + " keys masked that the mask keeps (first row " +
                std::to_string(extra.front()->row) + " key " + std::to_string(extra.front()->col) + "), " +
                pattern_of(d, extra);
  }
  if (!missing.empty()) {
    evidence += "; " + std::to_string(missing.size()) + " masked keys attended (first row " +
                std::to_string(missing.front()->row) + " key " + std::to_string(missing.front()->col) + "), " +
                pattern_of(d, missing);
    if (missing_values.size() == 1) evidence += ", every one holding " + number_text(missing_values.begin()->first);
  }
  return {"mask-mismatch", static_cast<double>(explained) / static_cast<double>(d.bad.size()), evidence};
}

// What factor f of a head's ALiBi slope is: another head's slope ("" when none is).
std::string slope_of_other_head(const Diagnosis& d, double f) {
  const std::vector<double>& slopes = d.inputs.problem.mask.alibi_slopes;
  const std::size_t own = static_cast<std::size_t>(d.h);
  if (own >= slopes.size() || slopes[own] == 0) return "";
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    if (h != own && std::fabs(f * slopes[own] / slopes[h] - 1) < 1e-3) {
      return " (the ALiBi slope of head " + std::to_string(h) + ", " + number_text(slopes[h]) + ", where head " +
             std::to_string(own) + "'s is " + number_text(slopes[own]) + ")";
    }
  }
  return "";
}

// A finite bias (ALiBi, an additive mask) taken the wrong number of times: the kernel's score is
// the reference's with its bias b taken f times, reference + (f - 1) b: f = 0 the bias dropped,
// a ratio of two heads' ALiBi slopes another head's slope, the softmax scale a bias scaled with
// the scores. f is fitted on the first bad element with a finite nonzero bias; that element is
// evidence only once another confirms it.
Explanation bias_factor(const Diagnosis& d) {
  if (d.result.quantity != Quantity::scores) return {};
  double f = 0;
  bool fitted = false;
  std::size_t explained = 0;
  for (const BadElement& e : d.bad) {
    const double bias = d.head.bias_at(e.row, e.col);
    if (!std::isfinite(bias) || bias == 0 || !std::isfinite(e.kernel) || !std::isfinite(e.reference)) continue;
    if (!fitted) {
      f = 1 + (e.kernel - e.reference) / bias;
      fitted = true;
      continue;
    }
    if (d.explains_better(e, e.reference + (f - 1) * bias)) ++explained;
  }
  if (explained == 0 || std::fabs(f - 1) < 1e-3) return {};
  ++explained;  // the element f was fitted on, confirmed
  std::string named = std::fabs(f) < 1e-3 ? " (the bias dropped)" : slope_of_other_head(d, f);
  if (named.empty()) named = named_factor(d, f);
  return {"mask-mismatch", static_cast<double>(explained) / static_cast<double>(d.bad.size()),
          d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
              " is the reference with its finite mask bias taken " + number_text(f) + " times" + named +
              ": a bias (ALiBi, additive mask) of the wrong head or batch, or scaled wrong; " +
              explained_text(d, explained)};
}

// The mask of another (batch, head): the kernel's scores are the reference's with this head's
// mask replaced by that one's (a mask or bias indexed by the wrong batch or head). The other
// heads of the batch first, then the head in the other batches, then the rest: at most 256.
Explanation other_head_mask(const Diagnosis& d) {
  if (d.result.quantity != Quantity::scores) return {};
  const Problem& p = d.inputs.problem;
  const std::int64_t batches = p.shape.batch, heads = p.shape.heads;
  std::vector<std::pair<std::int64_t, std::int64_t>> candidates;
  for (std::int64_t h = 0; h < heads; ++h) {
    if (h != d.h) candidates.emplace_back(d.b, h);
  }
  for (std::int64_t b = 0; b < batches; ++b) {
    if (b != d.b) candidates.emplace_back(b, d.h);
  }
  for (std::int64_t b = 0; b < batches && candidates.size() < 256; ++b) {
    for (std::int64_t h = 0; h < heads && candidates.size() < 256; ++h) {
      if (b != d.b && h != d.h) candidates.emplace_back(b, h);
    }
  }
  if (candidates.size() > 256) candidates.resize(256);
  // Each bad element's score without its mask, as the reference forms it.
  std::vector<double> unmasked(d.bad.size());
  for (std::size_t i = 0; i < d.bad.size(); ++i) {
    const BadElement& e = d.bad[i];
    double s = d.head.scale * d.head.q.row(e.r).dot(d.head.k().row(e.col));
    if (d.head.softcap > 0) s = d.head.softcap * std::tanh(s / d.head.softcap);
    unmasked[i] = s;
  }
  Explanation best;
  for (const auto& [b, h] : candidates) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < d.bad.size(); ++i) {
      const BadElement& e = d.bad[i];
      if (d.explains_better(e, unmasked[i] + mask_bias(p, b, h, e.row, e.col))) ++n;
    }
    const double fraction = static_cast<double>(n) / static_cast<double>(d.bad.size());
    if (n == 0 || fraction <= best.explained) continue;
    const std::string which = b == d.b ? "head " + std::to_string(h) + " of the batch"
                                       : h == d.h ? "the head in batch " + std::to_string(b)
                                                  : "b=" + std::to_string(b) + " h=" + std::to_string(h);
    best = {"mask-mismatch", fraction,
            d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) + " is masked as " + which +
                " is (mask and bias of b=" + std::to_string(b) + " h=" + std::to_string(h) +
                "): a mask or bias read for the wrong batch or head; " + explained_text(d, n)};
    if (n == d.bad.size()) break;
  }
  return best;
}

// What a kernel writes for a row with no key when its mask is a finite bias b on every key:
// softmax(s + b) over all keys. When b swamps the scores (s + b rounds to b) every key weighs
// the same, the uniform average of V; when it does not, the common b cancels in the softmax and
// the row is attention over every key with the mask ignored.
struct MaskedRowOutput {
  const char* what;
  MatrixR (*row)(const Diagnosis& d, std::int64_t row, std::int64_t keys);
};

MatrixR uniform_row(const Diagnosis& d, std::int64_t, std::int64_t keys) { return d.head.v().topRows(keys).colwise().mean(); }

MatrixR unmasked_row(const Diagnosis& d, std::int64_t row, std::int64_t keys) {
  const Eigen::RowVectorXd s = d.row_scores(row, keys, false);
  const Eigen::RowVectorXd p = (s.array() - s.maxCoeff()).exp().matrix();
  return (p / p.sum()) * d.head.v().topRows(keys);
}

Explanation masked_row_output(const Diagnosis& d) {
  if (d.result.quantity != Quantity::output || d.result.dims.size() != 4) return {};
  const std::int64_t keys = d.inputs.problem.kv_len_of(d.b);
  if (keys == 0) return {};
  const double u = unit_roundoff(d.inputs.problem.dtype);
  const MaskedRowOutput candidates[] = {
      {"the uniform average of V over their keys (every masked key weighted alike: a finite masking bias that "
       "swamps the scores)", uniform_row},
      {"attention over every key with the mask ignored (a finite masking bias, the same for every key, cancels in "
       "the softmax)", unmasked_row}};
  Explanation best;
  for (const MaskedRowOutput& candidate : candidates) {
    std::map<std::int64_t, MatrixR> predicted;  // per masked row
    std::size_t explained = 0;
    std::set<std::int64_t> rows;
    for (const BadElement& e : d.bad) {
      bool masked_row = true;
      for (std::int64_t j = 0; j < keys && masked_row; ++j) masked_row = d.head.bias_at(e.row, j) == -kInf;
      if (!masked_row || e.reference != 0.0) continue;
      auto it = predicted.find(e.row);
      if (it == predicted.end()) it = predicted.emplace(e.row, candidate.row(d, e.row, keys)).first;
      // A correct kernel's rounding of such a row: the weights and V in the input format and
      // the output rounded to it, u (sum_j |v_jc| / keys + |o_c|), with a factor 8 to spare.
      const double x = it->second(0, e.col);
      const double tolerance = 8 * u * (d.head.v().col(e.col).topRows(keys).cwiseAbs().mean() + std::fabs(x));
      if (std::fabs(e.kernel - x) <= tolerance + 2 * e.bound) {
        ++explained;
        rows.insert(e.row);
      }
    }
    const double fraction = static_cast<double>(explained) / static_cast<double>(d.bad.size());
    if (explained == 0 || fraction <= best.explained) continue;
    best = {"mask-mismatch", fraction,
            std::to_string(rows.size()) + " rows of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
                " have no key to attend to, and the kernel wrote " + candidate.what + ", over their " +
                std::to_string(keys) + " keys, where attention over no key is 0 (first row " +
                std::to_string(*rows.begin()) + "; " + explained_text(d, explained) + ")"};
  }
  return best;
}

}  // namespace

Explanation test_mask_mismatch(const Diagnosis& d) {
  if (!d.key_indexed()) return masked_row_output(d);
  Explanation best = masked_pattern(d);
  for (Explanation other : {bias_factor(d), other_head_mask(d)}) {
    if (other.explained > best.explained) best = std::move(other);
  }
  return best;
}

}  // namespace fc

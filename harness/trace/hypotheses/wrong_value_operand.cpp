// wrong-operand in P.V: the stage equals its reference plus what reading V from another
// place changes, sum_j w_ij (V'(j, c) - V(j, c)), with w the weights the stage multiplied (the
// captured probabilities, or the tile's p~) and V' V read from another head, shifted rows in
// storage order (as K, wrong_operand.cpp), or transposed (element (j, c) read at c * Sk + j).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "harness/trace/hypotheses/diagnosis.h"
#include "reference/matrix.h"

namespace fc {
namespace {

constexpr std::int64_t kSearchBudget = std::int64_t{1} << 26;  // multiply-adds

struct Candidate {
  std::int64_t head = 0, shift = 0;
  bool transposed = false;
};

class ValueReader {
 public:
  explicit ValueReader(const Diagnosis& d) : d_(d) {
    const Problem& p = d.inputs.problem;
    kv_heads_ = p.shape.kv_head_count();
    for (std::int64_t b = 0; b < p.shape.batch; ++b) {
      start_.push_back(p.layout.paged() ? b * p.layout.max_blocks * p.layout.block_size
                                        : (b == 0 ? 0 : start_.back() + p.kv_len_of(b - 1)));
      length_.push_back(p.kv_len_of(b));
    }
    positions_ = start_.back() + length_.back();
    own_head_ = p.shape.kv_head_of(d.h);
  }
  std::int64_t positions() const { return positions_; }
  std::int64_t heads() const { return kv_heads_; }
  std::int64_t own_head() const { return own_head_; }

  // V'(j, c) under a candidate; nullopt where nothing is stored.
  std::optional<double> value(const Candidate& c, std::int64_t j, std::int64_t col) {
    const std::int64_t dim = d_.head.v().cols(), keys = length_[static_cast<std::size_t>(d_.b)];
    if (c.transposed) {
      const std::int64_t flat = col * keys + j;
      if (flat >= keys * dim) return std::nullopt;
      return d_.head.v()(flat / dim, flat % dim);
    }
    const std::int64_t pos = start_[static_cast<std::size_t>(d_.b)] + j + c.shift;
    for (std::size_t b = 0; b < start_.size(); ++b) {
      if (pos >= start_[b] && pos < start_[b] + length_[b]) return rows(static_cast<std::int64_t>(b), c.head)(pos - start_[b], col);
    }
    return std::nullopt;
  }

 private:
  const MatrixR& rows(std::int64_t b, std::int64_t head) {
    MatrixR& m = cache_[{b, head}];
    if (m.size() == 0) m = head_matrix(d_.inputs.v, b, head);
    return m;
  }
  const Diagnosis& d_;
  std::int64_t kv_heads_ = 0, positions_ = 0, own_head_ = 0;
  std::vector<std::int64_t> start_, length_;
  std::map<std::pair<std::int64_t, std::int64_t>, MatrixR> cache_;
};

std::optional<double> predicted(const Diagnosis& d, const StageWeights& w, ValueReader& v, const Candidate& c,
                                const BadElement& e) {
  double change = 0;
  for (Eigen::Index j = 0; j < w.w.cols(); ++j) {
    const double weight = w.w(e.r, j);
    if (weight == 0 || !std::isfinite(weight)) continue;
    const std::int64_t key = w.first_key + j;
    if (key >= d.head.v().rows()) break;
    const std::optional<double> read = v.value(c, key, e.col);
    if (!read) return std::nullopt;
    change += weight * (*read - d.head.v()(key, e.col));
  }
  return e.reference + change;
}

std::string describe(const ValueReader& v, const Candidate& c) {
  if (c.transposed) return "V read transposed (element (j, c) taken at c·Sk + j)";
  std::string s = "V read";
  if (c.head != v.own_head()) s += " from head " + std::to_string(c.head) + " (expected K/V head " + std::to_string(v.own_head()) + ")";
  if (c.shift != 0) {
    s += std::string(c.head != v.own_head() ? " and" : "") + " " + std::to_string(std::llabs(c.shift)) + " rows " +
         (c.shift > 0 ? "past" : "before") + " where it is stored";
  }
  return s;
}

}  // namespace

Explanation test_wrong_value_operand(const Diagnosis& d) {
  if (d.result.kind != StageKind::pv || d.result.dims.size() != 4 || d.kernel.size() == 0) return {};
  const std::optional<StageWeights> w = stage_weights(d);
  if (!w || w->w.rows() != d.kernel.rows()) return {};
  ValueReader v(d);
  if (v.positions() * v.heads() * w->w.cols() > kSearchBudget) return {};
  std::vector<Candidate> candidates{{v.own_head(), 0, true}};
  for (std::int64_t head = 0; head < v.heads(); ++head) {
    for (std::int64_t pos = -v.positions(); pos < v.positions(); ++pos) {
      if (head != v.own_head() || pos != 0) candidates.push_back({head, pos, false});
    }
  }
  Explanation best;
  std::size_t best_n = 0;
  for (const BadElement* probe : d.probes(2)) {
    for (const Candidate& c : candidates) {
      const std::optional<double> first = predicted(d, *w, v, c, *probe);
      if (!first || !d.explains(*probe, *first)) continue;
      std::size_t n = 0;
      for (const BadElement& e : d.bad) {
        const std::optional<double> x = predicted(d, *w, v, c, e);
        if (x && d.explains(e, *x)) ++n;
      }
      if (n > best_n) {
        best_n = n;
        best = {"wrong-operand", static_cast<double>(n) / static_cast<double>(d.bad.size()),
                d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) + " equals P·V with " +
                    describe(v, c) + ": " + explained_text(d, n)};
      }
    }
    if (best.explained >= 0.9) break;
  }
  return best;
}

}  // namespace fc

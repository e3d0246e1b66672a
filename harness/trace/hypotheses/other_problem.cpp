// The kernel solved another attention problem than the one asked: its output equals the FP64
// attention output of the same inputs read another way. For an output compared with nothing
// captured before it (a bug report's `out` alone), the element-wise hypotheses have no
// intermediate to test, but the whole output of each alternative problem can be formed for the
// bad rows and compared: another softmax scale (scale-mismatch), the causal mask aligned the
// other way, dropped, or the mask read transposed, the softcap or the ALiBi bias left out, ALiBi's
// sign flipped (mask-mismatch), the K/V of another head or batch, K or V read transposed
// (wrong-operand), the softmax taken over the queries rather than the keys (softmax-axis).
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"
#include "reference/attention.h"

namespace fc {
namespace {

using Bias = std::function<double(std::int64_t row, std::int64_t key)>;

struct Alternative {
  std::string cause, what;
  const MatrixR* k = nullptr;
  const MatrixR* v = nullptr;
  double scale = 0;
  Bias bias;
  double softcap = -1;  // < 0: the problem's
};

// A [rows, cols] matrix's row-major elements read as [cols, rows] stored row-major, transposed
// back: what a kernel that takes a [keys][D] tensor for a [D][keys] one multiplies with.
MatrixR read_transposed(const MatrixR& m) {
  MatrixR t(m.rows(), m.cols());
  const Eigen::Index rows = m.rows(), cols = m.cols();
  for (Eigen::Index i = 0; i < rows * cols; ++i) t(i % rows, i / rows) = m(i / cols, i % cols);
  return t;
}

// Row `r` (query row `row`) of softmax(scale q k^T (soft-capped) + bias) v, in FP64; 0 for a row
// with no key, the reference's convention.
Eigen::RowVectorXd output_row(const Diagnosis& d, const Alternative& a, Eigen::Index r, std::int64_t row) {
  const std::int64_t keys = a.k->rows();
  Eigen::RowVectorXd s = a.scale * (d.head.q.row(r) * a.k->transpose());
  const double softcap = a.softcap < 0 ? d.head.softcap : a.softcap;
  if (softcap > 0) s = (softcap * (s.array() / softcap).tanh()).matrix();
  for (std::int64_t j = 0; j < keys; ++j) s(j) += a.bias(row, j);
  const double m = s.maxCoeff();
  if (!std::isfinite(m)) return Eigen::RowVectorXd::Zero(a.v->cols());
  const Eigen::RowVectorXd p = (s.array() - m).exp().matrix();
  return (p / p.sum()) * *a.v;
}

std::size_t explained_by(const Diagnosis& d, const Alternative& a) {
  std::map<Eigen::Index, Eigen::RowVectorXd> rows;
  std::size_t n = 0;
  for (const BadElement& e : d.bad) {
    auto it = rows.find(e.r);
    if (it == rows.end()) it = rows.emplace(e.r, output_row(d, a, e.r, e.row)).first;
    if (d.explains_better(e, it->second(e.c))) ++n;
  }
  return n;
}

const char* causal_name(Causal c) {
  switch (c) {
    case Causal::top_left: return "causal aligned top-left (key <= row)";
    case Causal::bottom_right: return "causal aligned bottom-right (key <= row + Sk - Sq)";
    default: return "no causal mask";
  }
}

// The softmax taken over the queries (each key's column normalized) instead of over the keys,
// softmax(S, dim=-2) V: it needs every row of the head, so only where the head's scores fit
// kMaxQueryAxisScores doubles. Counts the bad elements it explains better than the reference.
constexpr std::int64_t kMaxQueryAxisScores = std::int64_t{1} << 25;
std::size_t explained_by_query_axis(const Diagnosis& d) {
  const Eigen::Index rows = d.head.q.rows(), keys = d.head.k().rows();
  if (rows < 2 || rows * keys > kMaxQueryAxisScores) return 0;
  MatrixR s(rows, keys);
  for (Eigen::Index i = 0; i < rows; ++i) s.row(i) = d.row_scores(i, keys, true);
  for (Eigen::Index j = 0; j < keys; ++j) {  // each key's column over the queries; an empty one 0
    const double m = s.col(j).maxCoeff();
    if (!std::isfinite(m)) {
      s.col(j).setZero();
      continue;
    }
    s.col(j) = (s.col(j).array() - m).exp().matrix();
    s.col(j) /= s.col(j).sum();
  }
  // The probabilities themselves, or the output they weigh V with.
  const MatrixR out = d.result.quantity == Quantity::probs ? s : MatrixR(s * d.head.v());
  std::size_t n = 0;
  for (const BadElement& e : d.bad) {
    if (e.r < out.rows() && e.c < out.cols() && d.explains_better(e, out(e.r, e.c))) ++n;
  }
  return n;
}

Explanation query_axis_explanation(const Diagnosis& d) {
  const std::size_t n = explained_by_query_axis(d);
  if (n == 0) return {};
  return {"softmax-axis", static_cast<double>(n) / static_cast<double>(d.bad.size()),
          d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
              " equals attention with the softmax taken over the queries (each key's column normalized, "
              "softmax(S, dim=-2)) instead of over the keys: " + explained_text(d, n)};
}

}  // namespace

Explanation test_other_problem(const Diagnosis& d) {
  if (d.kernel.size() == 0) return {};
  // Whole-row probabilities (a full chain's softmax): only the softmax's own axis is testable.
  if (d.result.quantity == Quantity::probs && d.col_offset == 0 && d.kernel.cols() == d.head.k().rows()) {
    return query_axis_explanation(d);
  }
  if (d.result.quantity != Quantity::output || d.result.dims.size() != 4) return {};
  const Problem& p = d.inputs.problem;
  const Shape& s = p.shape;
  // Every alternative forms the whole rows it tests: the work of all of them is bounded below.
  std::int64_t bad_rows = 0;
  for (std::size_t i = 0; i < d.bad.size(); ++i) bad_rows += i == 0 || d.bad[i].r != d.bad[i - 1].r;
  const double per_alternative = static_cast<double>(bad_rows) * static_cast<double>(s.kv_len) * static_cast<double>(s.head_dim);
  const Bias own = [&](std::int64_t row, std::int64_t key) { return mask_bias(p, d.b, d.h, row, key); };
  std::vector<Alternative> alternatives;
  const auto with_scale = [&](double factor, const std::string& why) {
    if (std::fabs(factor - 1) < 1e-6) return;  // the problem itself
    Alternative a{"scale-mismatch",
                  "attention with the softmax scale " + number_text(d.head.scale * factor) + " (" + why + ") where it is " +
                      number_text(d.head.scale),
                  &d.head.k(), &d.head.v(), d.head.scale * factor, own};
    alternatives.push_back(std::move(a));
  };
  const double dim = static_cast<double>(s.head_dim);
  with_scale(d.head.scale, "the scale applied twice");
  with_scale(1 / d.head.scale, "no scale");
  with_scale(1 / (std::sqrt(dim) * d.head.scale), "1/sqrt(D), the default, where another scale was given");
  with_scale(1 / std::log(2.0), "log2(e): exp2 without the conversion");
  with_scale(std::log(2.0), "ln 2");

  // Another mask: the causal part another way; ALiBi left out, or with its sign flipped (a bias
  // growing with the distance); the mask read transposed (key padding as query padding).
  struct MaskVariant {
    Problem problem;
    std::string what;
  };
  std::vector<MaskVariant> masks;
  masks.reserve(5);
  for (const Causal c : {Causal::none, Causal::top_left, Causal::bottom_right}) {
    if (c == p.mask.causal) continue;
    masks.push_back({p, std::string(causal_name(c)) + " where the mask has " + causal_name(p.mask.causal)});
    masks.back().problem.mask.causal = c;
  }
  if (p.mask.has_alibi()) {
    masks.push_back({p, "no ALiBi bias where the mask has ALiBi"});
    masks.back().problem.mask.alibi_slopes.clear();
    masks.push_back({p, "ALiBi's sign flipped (a bias of +slope |i - j|, growing with the distance) where the mask has ALiBi"});
    for (double& slope : masks.back().problem.mask.alibi_slopes) slope = -slope;
  }
  for (const MaskVariant& m : masks) {
    const Problem& v = m.problem;
    alternatives.push_back({"mask-mismatch", "attention with " + m.what, &d.head.k(), &d.head.v(), d.head.scale,
                            [&v, &d](std::int64_t row, std::int64_t key) { return mask_bias(v, d.b, d.h, row, key); }});
  }
  if (s.q_len == s.kv_len && p.mask.describe() != "none") {
    alternatives.push_back({"mask-mismatch", "attention with the mask transposed (rows as keys: key padding applied to queries)",
                            &d.head.k(), &d.head.v(), d.head.scale,
                            [&](std::int64_t row, std::int64_t key) { return mask_bias(p, d.b, d.h, key, row); }});
  }
  if (d.head.softcap > 0) {
    alternatives.push_back({"mask-mismatch",
                            "attention without the softcap (scores not capped) where it is " + number_text(d.head.softcap),
                            &d.head.k(), &d.head.v(), d.head.scale, own, 0.0});
  }
  // K or V read transposed: a [keys][D] tensor taken for [D][keys].
  const MatrixR k_transposed = read_transposed(d.head.k()), v_transposed = read_transposed(d.head.v());
  alternatives.push_back({"wrong-operand", "attention with V read transposed (its [keys][D] elements taken as [D][keys])",
                          &d.head.k(), &v_transposed, d.head.scale, own});
  alternatives.push_back({"wrong-operand", "attention with K read transposed (its [keys][D] elements taken as [D][keys])",
                          &k_transposed, &d.head.v(), d.head.scale, own});

  // The K/V of another head of the batch, or of this head in another batch, while the work
  // of every alternative stays under about 2e10 multiply-adds; over it, the first of the
  // alternatives above, in their order.
  const std::size_t budget = static_cast<std::size_t>(2e10 / std::max(per_alternative, 1.0));
  if (alternatives.size() > budget) {
    alternatives.erase(alternatives.begin() + static_cast<std::ptrdiff_t>(budget), alternatives.end());
  }
  std::vector<HeadKv> others;
  std::vector<std::string> other_names;
  const std::int64_t kv_heads = s.kv_head_count(), own_kv = s.kv_head_of(d.h);
  const auto room = [&] { return alternatives.size() + others.size() < budget; };
  for (std::int64_t kv = 0; kv < kv_heads && others.size() < 32 && room(); ++kv) {
    if (kv == own_kv) continue;
    others.push_back(head_kv(d.inputs, d.b, kv * s.group()));
    other_names.push_back("K/V head " + std::to_string(kv) + ", where query head " + std::to_string(d.h) + "'s K/V head is " +
                          std::to_string(own_kv));
  }
  for (std::int64_t b = 0; b < s.batch && others.size() < 48 && room(); ++b) {
    if (b == d.b || p.kv_len_of(b) != p.kv_len_of(d.b)) continue;
    others.push_back(head_kv(d.inputs, b, d.h));
    other_names.push_back("the K/V of batch " + std::to_string(b));
  }
  for (std::size_t i = 0; i < others.size(); ++i) {
    if (others[i].kv->k.rows() != d.head.k().rows()) continue;
    alternatives.push_back({"wrong-operand", "attention over " + other_names[i], &others[i].kv->k, &others[i].kv->v,
                            d.head.scale, own});
  }

  Explanation best = query_axis_explanation(d);
  for (const Alternative& a : alternatives) {
    const std::size_t n = explained_by(d, a);
    const double fraction = static_cast<double>(n) / static_cast<double>(d.bad.size());
    if (n == 0 || fraction <= best.explained) continue;
    best = {a.cause, fraction,
            d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) + " equals " + a.what + ": " +
                explained_text(d, n)};
  }
  return best;
}

}  // namespace fc

// missing-keys / duplicated-keys: the output equals attention with a key, or a range of keys
// (a tile, or every key from some point on), left out or counted twice. With p the row's
// probabilities and o its output, dropping the keys J gives (o - sum_J p_j v_j) / (1 - sum_J p_j)
// and counting them twice (o + sum_J p_j v_j) / (1 + sum_J p_j) when it happens before the
// softmax normalizes; in P.V alone, o -/+ sum_J p_j v_j. Candidates come from the
// first bad row (every single key, aligned tiles of 16 to 128 keys, every tail) and are then
// tested on every bad element, each row with its own probabilities.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "harness/trace/hypotheses/diagnosis.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Range {
  std::int64_t begin, end;  // keys [begin, end)
  bool twice;
  bool renormalized = true;  // before the softmax (the weights renormalized), or in P.V alone
};

struct Row {
  std::vector<double> p;  // probabilities of the row's keys
  MatrixR o;              // 1 x D
};

Row row_of(const Diagnosis& d, std::int64_t i, std::int64_t keys) {
  Row r;
  r.p.assign(static_cast<std::size_t>(keys), 0.0);
  double m = -kInf;
  std::vector<double> s(static_cast<std::size_t>(keys), -kInf);
  for (std::int64_t j = 0; j < keys; ++j) {
    const double bias = d.head.bias_at(i, j);
    if (bias == -kInf) continue;
    double t = d.head.scale * d.head.q.row(i).dot(d.head.k().row(j));
    if (d.head.softcap > 0) t = d.head.softcap * std::tanh(t / d.head.softcap);
    s[static_cast<std::size_t>(j)] = t + bias;
    m = std::max(m, s[static_cast<std::size_t>(j)]);
  }
  r.o = MatrixR::Zero(1, d.head.v().cols());
  if (m == -kInf) return r;
  double l = 0;
  for (std::int64_t j = 0; j < keys; ++j) l += (r.p[static_cast<std::size_t>(j)] = std::exp(s[static_cast<std::size_t>(j)] - m));
  for (std::int64_t j = 0; j < keys; ++j) {
    r.p[static_cast<std::size_t>(j)] /= l;
    r.o += r.p[static_cast<std::size_t>(j)] * d.head.v().row(j);
  }
  return r;
}

double predicted(const Diagnosis& d, const Row& row, const Range& range, std::int64_t col) {
  double mass = 0, weighted = 0;
  for (std::int64_t j = range.begin; j < range.end; ++j) {
    mass += row.p[static_cast<std::size_t>(j)];
    weighted += row.p[static_cast<std::size_t>(j)] * d.head.v()(j, col);
  }
  const double sign = range.twice ? 1.0 : -1.0;
  const double denominator = range.renormalized ? 1 + sign * mass : 1.0;
  return denominator <= 0 ? std::numeric_limits<double>::quiet_NaN() : (row.o(0, col) + sign * weighted) / denominator;
}

std::string range_text(const Range& r, std::int64_t keys) {
  if (r.end - r.begin == 1) return "key " + std::to_string(r.begin);
  if (r.end == keys) return "keys " + std::to_string(r.begin) + ".." + std::to_string(keys - 1) + " (every key from " +
                            std::to_string(r.begin) + " on)";
  return "keys " + std::to_string(r.begin) + ".." + std::to_string(r.end - 1) + " (" + std::to_string(r.end - r.begin) +
         " keys)";
}

}  // namespace

Explanation test_key_range(const Diagnosis& d) {
  if (d.result.quantity != Quantity::output || d.result.dims.size() != 4) return {};
  const std::int64_t keys = d.inputs.problem.kv_len_of(d.b);
  if (keys == 0 || keys * d.head.v().cols() > (std::int64_t{1} << 24)) return {};
  std::map<std::int64_t, Row> rows;
  auto row = [&](std::int64_t i) -> const Row& {
    auto it = rows.find(i);
    if (it == rows.end()) it = rows.emplace(i, row_of(d, i, keys)).first;
    return it->second;
  };
  // Candidates: those that explain every bad element of the first bad row.
  const std::int64_t first_row = d.bad.front().row;
  std::vector<const BadElement*> first;
  for (const BadElement& e : d.bad) {
    if (e.row == first_row) first.push_back(&e);
  }
  std::vector<Range> ranges;
  for (bool renormalized : {true, false}) {
    for (bool twice : {false, true}) {
      for (std::int64_t j = 0; j < keys; ++j) ranges.push_back({j, j + 1, twice, renormalized});
      for (std::int64_t w : {16, 32, 64, 128}) {
        for (std::int64_t j = 0; j + 1 < keys && w < keys; j += w) ranges.push_back({j, std::min(keys, j + w), twice, renormalized});
      }
      for (std::int64_t j = 1; j < keys; ++j) ranges.push_back({j, keys, twice, renormalized});
    }
  }
  std::vector<Range> fitting;
  for (const Range& r : ranges) {
    bool all = true;
    for (const BadElement* e : first) {
      if (!d.explains_better(*e, predicted(d, row(first_row), r, e->col))) {
        all = false;
        break;
      }
    }
    if (all) fitting.push_back(r);
    if (fitting.size() >= 16) break;
  }
  Explanation best;
  std::size_t best_n = 0;
  for (const Range& r : fitting) {
    std::size_t n = 0;
    for (const BadElement& e : d.bad) {
      if (d.explains_better(e, predicted(d, row(e.row), r, e.col))) ++n;
    }
    if (n > best_n) {
      best_n = n;
      best = {r.twice ? "duplicated-keys" : "missing-keys", static_cast<double>(n) / static_cast<double>(d.bad.size()),
              d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
                  " equals attention with " + range_text(r, keys) + (r.twice ? " counted twice" : " left out") +
                  (r.renormalized ? "" : " of P·V (the softmax weights kept)") + ": " +
                  explained_text(d, n)};
    }
  }
  return best;
}

}  // namespace fc

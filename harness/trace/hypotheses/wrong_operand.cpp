// wrong-operand: a Q.K^T stage equals the same product over another row of an operand: Q or
// K read at the wrong offset, stride, head or batch. Every row of an operand has a position
// in the order it is stored (the packed rows of every sequence for varlen, the block table's
// entries times the block size for a paged cache, batch after batch otherwise). The first bad
// element's score is searched over every row and head of Q and of K; each match gives a
// candidate (operand, head, position shift), which is then tested on every bad element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"
#include "reference/matrix.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Multiply-adds the search may spend (rows x heads x D).
constexpr std::int64_t kSearchBudget = std::int64_t{1} << 27;

struct Operand {
  bool is_q = true;
  std::int64_t heads = 0;
  std::int64_t rows_per_batch = 0;  // padded rows of one batch in the input tensor
  std::vector<std::int64_t> start;  // stored position of each batch's row 0
  std::vector<std::int64_t> length;  // rows of each batch that exist
  std::int64_t positions = 0;        // one past the last stored position
};

Operand operand_of(const Problem& p, bool is_q) {
  Operand o;
  o.is_q = is_q;
  o.heads = is_q ? p.shape.heads : p.shape.kv_head_count();
  o.rows_per_batch = is_q ? p.shape.q_len : p.shape.kv_len;
  std::int64_t at = 0;
  for (std::int64_t b = 0; b < p.shape.batch; ++b) {
    const std::int64_t len = is_q ? p.q_len_of(b) : p.kv_len_of(b);
    if (!is_q && p.layout.paged()) at = b * p.layout.max_blocks * p.layout.block_size;
    o.start.push_back(at);
    o.length.push_back(len);
    at += len;
    o.positions = std::max(o.positions, at);
  }
  return o;
}

std::int64_t position(const Operand& o, std::int64_t b, std::int64_t row) { return o.start[static_cast<std::size_t>(b)] + row; }

// (batch, row) stored at position `pos`, if a row exists there.
std::optional<std::pair<std::int64_t, std::int64_t>> at_position(const Operand& o, std::int64_t pos) {
  for (std::size_t b = 0; b < o.start.size(); ++b) {
    if (pos >= o.start[b] && pos < o.start[b] + o.length[b]) return std::pair(static_cast<std::int64_t>(b), pos - o.start[b]);
  }
  return std::nullopt;
}

struct Candidate {
  bool is_q;
  std::int64_t head, shift;
  bool operator==(const Candidate& c) const { return is_q == c.is_q && head == c.head && shift == c.shift; }
};

double score(const Diagnosis& d, const double* q, const double* k, std::int64_t dim, double bias) {
  double t = 0;
  for (std::int64_t x = 0; x < dim; ++x) t += q[x] * k[x];
  t *= d.head.scale;
  if (d.head.softcap > 0) t = d.head.softcap * std::tanh(t / d.head.softcap);
  return t + bias;
}

class Search {
 public:
  explicit Search(const Diagnosis& d) : d_(d), q_(operand_of(d.inputs.problem, true)), k_(operand_of(d.inputs.problem, false)) {}

  // The row of an operand at a position and head, as a pointer into the FP64 copy.
  const double* row(const Operand& o, std::int64_t head, std::int64_t pos) {
    const auto bt = at_position(o, pos);
    if (!bt || head < 0 || head >= o.heads) return nullptr;
    MatrixR& m = cache(o, bt->first, head);
    return m.row(bt->second).data();
  }

  std::vector<Candidate> candidates(const BadElement& e) {
    std::vector<Candidate> out;
    const std::int64_t dim = d_.head.q.cols();
    const double bias = d_.head.bias_at(e.row, e.col);
    if (bias == -kInf || !std::isfinite(e.kernel)) return out;
    const std::int64_t k_head = d_.inputs.problem.shape.kv_head_of(d_.h);
    for (const Operand* o : {&q_, &k_}) {
      if ((o->positions * o->heads * dim) > kSearchBudget) continue;
      const std::int64_t own_pos = position(*o, d_.b, o->is_q ? e.row : e.col);
      const double* other = o->is_q ? d_.head.k().row(e.col).data() : d_.head.q.row(e.row).data();
      for (std::int64_t head = 0; head < o->heads; ++head) {
        for (std::int64_t pos = 0; pos < o->positions; ++pos) {
          const double* r = row(*o, head, pos);
          if (!r) continue;
          BadElement probe = e;
          if (!d_.explains(probe, score(d_, r, other, dim, bias))) continue;
          const Candidate c{o->is_q, head, pos - own_pos};
          const bool own = c.shift == 0 && head == (o->is_q ? d_.h : k_head);
          if (!own && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
          if (out.size() >= 64) return out;
        }
      }
    }
    return out;
  }

  std::size_t explained(const Candidate& c) {
    const Operand& o = c.is_q ? q_ : k_;
    const std::int64_t dim = d_.head.q.cols();
    std::size_t n = 0;
    for (const BadElement& e : d_.bad) {
      const double bias = d_.head.bias_at(e.row, e.col);
      if (bias == -kInf) continue;
      const double* r = row(o, c.head, position(o, d_.b, c.is_q ? e.row : e.col) + c.shift);
      if (!r) continue;
      const double* other = c.is_q ? d_.head.k().row(e.col).data() : d_.head.q.row(e.row).data();
      if (d_.explains(e, score(d_, r, other, dim, bias))) ++n;
    }
    return n;
  }

 private:
  MatrixR& cache(const Operand& o, std::int64_t b, std::int64_t head) {
    auto& slot = (o.is_q ? q_rows_ : k_rows_)[{b, head}];
    if (slot.size() == 0) slot = head_matrix(o.is_q ? d_.inputs.q : d_.inputs.k, b, head);
    return slot;
  }

  const Diagnosis& d_;
  Operand q_, k_;
  std::map<std::pair<std::int64_t, std::int64_t>, MatrixR> q_rows_, k_rows_;
};

std::string describe(const Diagnosis& d, const Candidate& c) {
  const std::int64_t expected_head = c.is_q ? d.h : d.inputs.problem.shape.kv_head_of(d.h);
  std::string s = std::string(c.is_q ? "Q" : "K") + " read ";
  if (c.head != expected_head) {
    s += "from head " + std::to_string(c.head) + " (query head " + std::to_string(d.h) + " reads " +
         (c.is_q ? "its own" : "K/V head " + std::to_string(expected_head)) + ")";
  }
  if (c.shift != 0) {
    s += std::string(c.head != expected_head ? " and " : "") + std::to_string(std::llabs(c.shift)) + " rows " +
         (c.shift > 0 ? "past" : "before") + " where it is stored (" +
         (c.is_q ? "query" : "key") + " rows packed in storage order" +
         (!c.is_q && d.inputs.problem.layout.paged() ? ", the block table's entries times the block size" : "") + ")";
  }
  return s;
}

}  // namespace

Explanation test_wrong_operand(const Diagnosis& d) {
  if (d.result.kind != StageKind::qk || d.result.quantity != Quantity::scores) return {};
  Search search(d);
  Explanation best;
  std::size_t best_n = 0;
  // The first bad elements that give candidates (a few, in case the first is a coincidence).
  for (const BadElement* probe : d.probes(3)) {
    const std::vector<Candidate> cs = search.candidates(*probe);
    if (cs.empty()) continue;
    for (const Candidate& c : cs) {
      const std::size_t n = search.explained(c);
      if (n > best_n) {
        best_n = n;
        best = {"wrong-operand", static_cast<double>(n) / static_cast<double>(d.bad.size()),
                d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
                    " equals scale·q·kᵀ with " + describe(d, c) + ": " + explained_text(d, n)};
      }
    }
    if (best.explained >= 0.9) break;
  }
  return best;
}

}  // namespace fc

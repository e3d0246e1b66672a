#pragma once
// Causes from evidence: for the first stage output that is wrong (finite values over their
// bound, or a finite value where the reference has none), each hypothesis predicts what the
// kernel would hold under one kind of bug, tested on the captured numbers. An element is
// explained when the prediction equals the kernel's value within that element's bound plus
// the rounding of the kernel's format (or is the same infinity, or the same zero).
// The registry (hypotheses.cpp) runs them all and keeps the best explanation; none of them
// knows a fault's name.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/inputs.h"
#include "harness/trace/evaluate.h"
#include "harness/trace/session.h"
#include "reference/stage_eval.h"
#include "reports/case_result.h"

namespace fc {

struct RowSample;

// One bad element of the failing head: its row (the query row) and column (the global key
// for key-indexed quantities, the feature for outputs, -1 for row quantities).
struct BadElement {
  std::int64_t row = 0, col = -1;
  Eigen::Index r = 0, c = 0;  // its place in the head's matrices
  double kernel = 0, reference = 0, bound = 0;
};

struct Diagnosis {
  Diagnosis(const AttentionInputs& in, const TraceRun& r, const OutputResult& out) : inputs(in), run(r), result(out) {}
  const AttentionInputs& inputs;
  const TraceRun& run;
  const OutputResult& result;
  std::int64_t b = 0, h = 0;
  HeadInputs head;                  // (b, h) in FP64: q, its K/V head's k and v, bias, scale
  MatrixR kernel, reference, bound;  // the failing output's head, its reference and deciding bound
  const HostTensor* reference_tensor = nullptr;  // the reference of every head (end to end or stage-local)
  const RowSample* sample = nullptr;  // the judged rows (null: every row); other rows' references are 0
  std::int64_t col_offset = 0;      // global key of column 0 (a tile)
  bool stage_local = false;
  std::vector<BadElement> bad;      // in row-major order, at most kMaxBad
  std::int64_t bad_total = 0;

  bool key_indexed() const;  // scores, probs, p~: columns are keys
  bool judged(std::int64_t b, std::int64_t h, std::int64_t row) const;  // its reference was computed
  // Row `row` of the head's scores in FP64 over keys [0, keys): scale q kᵀ, soft-capped, and the
  // mask's bias when `masked` (without it: the scores as if nothing were masked).
  Eigen::RowVectorXd row_scores(Eigen::Index row, std::int64_t keys, bool masked) const;
  // Head (b, h) of the captured output of this quantity in stage (split, tile), value-scaled.
  std::optional<MatrixR> captured_head(Quantity q, int split, int tile) const;
  // A few bad elements to draw candidates from, spread over the bad rows (the first bad row
  // may hold garbage no hypothesis predicts, e.g. a row never written).
  std::vector<const BadElement*> probes(std::size_t count = 4) const;
  // Whether `predicted` explains the kernel's value at e.
  bool explains(const BadElement& e, double predicted) const;
  // explains(), and better than the reference: the reference does not explain it, or the
  // prediction is at most half as far from the kernel's value. An element a narrow miss leaves
  // bad (between one and two bounds off) is then evidence only for a prediction that fits it
  // much better than the reference; a hypothesis with a free parameter (a fitted factor, a key
  // chosen among all) otherwise "explains" noise just over the bound.
  bool explains_better(const BadElement& e, double predicted) const {
    return explains(e, predicted) &&
           (!explains(e, e.reference) || std::fabs(e.kernel - predicted) <= 0.5 * std::fabs(e.kernel - e.reference));
  }
};

constexpr std::size_t kMaxBad = 4096;

// The weights a P.V stage multiplied V by: the probabilities (a full chain) or the p~ of the
// same tile, as captured (value-scaled), with the key of their column 0.
struct StageWeights {
  MatrixR w;
  std::int64_t first_key = 0;
};
std::optional<StageWeights> stage_weights(const Diagnosis& d);

// The diagnosis of output `index` of the run at the failing element's head; `rows` the judged
// rows (a sample), null for every row.
Diagnosis make_diagnosis(const AttentionInputs& inputs, const TraceRun& run, const std::vector<OutputResult>& outputs,
                         const std::vector<OutputReferences>& references, std::size_t index, const Index4& at,
                         bool stage_local, const RowSample* rows);

struct Explanation {
  std::string cause;  // empty: no explanation
  double explained = 0;  // fraction of the bad elements
  std::string evidence;
};

// Every hypothesis, in the order that breaks ties (the more specific first).
std::vector<Explanation> test_hypotheses(const Diagnosis& d);

// The winner: the best explanation of at least 90% of the bad elements; otherwise cause
// "unknown" with "best partial: ..." (or an empty cause when no hypothesis explained any).
Explanation best_explanation(const std::vector<Explanation>& all);

// One family a file (harness/trace/hypotheses/*.cpp).
Explanation test_mask_mismatch(const Diagnosis& d);
Explanation test_wrong_operand(const Diagnosis& d);
Explanation test_wrong_value_operand(const Diagnosis& d);
Explanation test_misplaced_values(const Diagnosis& d);
Explanation test_key_range(const Diagnosis& d);
Explanation test_scale_mismatch(const Diagnosis& d);
Explanation test_rescale_factor(const Diagnosis& d);
Explanation test_lower_precision(const Diagnosis& d);
Explanation test_index_overflow(const Diagnosis& d);
Explanation test_other_problem(const Diagnosis& d);
// When logical element `flat` of a tensor starts the first row whose offset (in elements or
// bytes) passes 2^16, 2^31 or 2^32: the sentence that says so.
std::optional<std::string> index_wrap_at(const Dims& dims, DType dtype, std::int64_t flat);

// " (the softmax scale)", " (log2(e))", ...: what a fitted factor is among the constants a
// kernel multiplies by (the scale, sqrt(D), ln 2, 2, ...), within 1e-3; "" when none.
std::string named_factor(const Diagnosis& d, double factor);

// "N of M bad elements" with the fraction, for evidence sentences.
std::string explained_text(const Diagnosis& d, std::size_t explained);

}  // namespace fc

#pragma once
// Attribution: the first stage output (in execution order) whose flags or comparison fail,
// the element, and the cause, named by a stable id with one sentence of evidence.
#include <functional>
#include <optional>
#include <vector>

#include "harness/trace/evaluate.h"
#include "harness/trace/row_sample.h"
#include "harness/trace/session.h"
#include "reports/case_result.h"

namespace fc {

// NaN or Inf in an input tensor: the first one, as (tensor, flat index).
struct InputDefect {
  std::string tensor;  // "q", "k", "v"
  bool nan = false;
  std::int64_t index = 0;
  Index4 at;
};
std::optional<InputDefect> find_input_defect(const AttentionInputs& inputs);

// `references`: per output, what it was compared with (evaluate_outputs); used to recognise
// values off by one factor per row.
// `rows`: the judged rows of a row sample (null: every row).
std::optional<Divergence> attribute(const AttentionInputs& inputs, const TraceRun& run,
                                    const std::vector<OutputResult>& outputs,
                                    const std::vector<OutputReferences>& references, const RowSample* rows = nullptr);
// The references of captured output i, asked for only when a hypothesis needs them (the
// first failing output): a run judged without keeping references computes them then.
using ReferenceSource = std::function<const std::vector<OutputReferences>&(std::size_t captured_index)>;
std::optional<Divergence> attribute(const AttentionInputs& inputs, const TraceRun& run,
                                    const std::vector<OutputResult>& outputs, const ReferenceSource& references,
                                    const RowSample* rows = nullptr);

// The element attribution names for a failed output: the stage-local comparison's first
// over the deciding bound, else the end-to-end one's (none when neither failed).
struct Failure {
  ElementReport element;
  bool stage_local = false;
  double bound = 0;  // the deciding bound of the element (tight, unless judged by the worst case)
};
std::optional<Failure> failing_element(const OutputResult& r);
// d names f's element: its index, values and bounds, and which comparison found it.
void name_element(Divergence& d, const Failure& f);

// The reference's view of one row: its max and sum over the whole row, keys attended.
RowContext row_context(const AttentionInputs& inputs, std::int64_t b, std::int64_t h, std::int64_t row);

}  // namespace fc

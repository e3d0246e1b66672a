#pragma once
// Compares every captured stage output with its end-to-end and stage-local reference, head
// by head in parallel, and folds the per-head metrics in (b, h, row, col) order.
#include <vector>

#include "harness/trace/session.h"
#include "harness/trace/stage_reference.h"
#include "reports/case_result.h"

namespace fc {

// Per output, the references it was compared with, as whole FP64 tensors of its dims.
struct OutputReferences {
  // Empty when not compared.
  HostTensor end_to_end, end_to_end_bound, end_to_end_tight, local, local_bound, local_tight;
};

// Head (b, h) of every stage output the run captured on the host, exact, in FP64.
QuantityMap captured_quantities(const TraceRun& run, std::int64_t b, std::int64_t h);

// One head's comparison of one stage output: `kernel` holds the head's captured outputs
// (exact, in their stored formats), `e2e` its end-to-end reference.
struct OutputComparison {
  Metrics end_to_end, local;
  Bounded end_to_end_reference, local_reference;
};
OutputComparison compare_output(const HeadInputs& in, const Shape& shape, const StageGraph& graph,
                                const QuantityMap& e2e, const QuantityMap& kernel, const Stage& stage,
                                const StageOutput& output, const HeadSpot& spot, BoundChoice judged_by);

// `references`, when given, receives one entry per captured output (for snapshots).
std::vector<OutputResult> evaluate_outputs(const AttentionInputs& inputs, const TraceRun& run,
                                           std::vector<OutputReferences>* references = nullptr,
                                           BoundChoice judged_by = BoundChoice::tight);

}  // namespace fc

#pragma once
// Compares every captured stage output with its end-to-end and stage-local reference, head
// by head in parallel, and folds the per-head metrics in (b, h, row, col) order.
#include <vector>

#include "harness/trace/session.h"
#include "reports/case_result.h"

namespace fc {

// Per output, the references it was compared with, as whole FP64 tensors of its dims.
struct OutputReferences {
  HostTensor end_to_end, end_to_end_bound, local, local_bound;  // empty when not compared
};

// `references`, when given, receives one entry per captured output (for snapshots).
std::vector<OutputResult> evaluate_outputs(const AttentionInputs& inputs, const TraceRun& run,
                                           std::vector<OutputReferences>* references = nullptr);

}  // namespace fc

#pragma once
// Compares every captured stage output with its end-to-end and stage-local reference, head
// by head in parallel, and folds the per-head metrics in (b, h, row, col) order.
#include <vector>

#include "harness/trace/session.h"
#include "reports/case_result.h"

namespace fc {

std::vector<OutputResult> evaluate_outputs(const AttentionInputs& inputs, const TraceRun& run);

}  // namespace fc

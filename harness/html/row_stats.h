#pragma once
// Per-row values of one head over its whole key range, for the report's row plots: the row
// max, the row sum of exp(s - max) and the log-sum-exp, from the FP64 reference and from
// what the kernel captured (each split's last running max and sum, combined; its own lse
// where it captured one).
#include <cstdint>
#include <string>
#include <vector>

#include "harness/trace/session.h"
#include "reference/stage_eval.h"
#include "reports/case_result.h"

namespace fc {

struct RowStats {
  std::vector<double> max, sum, lse;  // one per query row; empty when not known
};

// From the inputs, in FP64: masked keys (-inf bias) do not count; a row with none has max
// -inf, sum 0, lse -inf; a NaN score makes its row's values NaN.
RowStats reference_row_stats(const HeadInputs& in);

// Which captured outputs hold the kernel's row values: for each split, the row max and
// row sum of its last tile; and each split's lse when every split captured one.
struct KernelRowSource {
  std::vector<std::size_t> max, sum, lse;  // indices into the run's outputs, one per split
  std::string description;                 // what a reader is told, or why there are none
  bool has_max_sum() const { return !max.empty(); }
};
KernelRowSource kernel_row_source(const TraceRun& run, const std::vector<OutputResult>& outputs);

// The kernel's rows of head (b, h); vectors stay empty where the source has nothing.
RowStats kernel_row_stats(const KernelRowSource& source, const TraceRun& run, const std::vector<OutputResult>& outputs,
                          std::int64_t b, std::int64_t h);

}  // namespace fc

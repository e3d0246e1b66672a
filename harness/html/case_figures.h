#pragma once
// The figures of one judged case for the HTML report (reports/html_report.h), drawn from the
// run's captured tensors and the references they were compared with:
//  - heatmaps of the first divergence's output and of the outputs asked for: per head, the
//    err/bound of every element (the comparison that failed first: stage-local, else end to
//    end) and masks of its NaN, Inf and unwritten elements, the first bad element marked;
//  - per head, the row max, row sum and lse of the reference against the kernel's;
//  - the cuBLASLt descriptors with their lint findings.
#include <string>
#include <vector>

#include "harness/trace/evaluate.h"
#include "harness/trace/session.h"
#include "reports/html_report.h"

namespace fc {

struct FigureOptions {
  // Outputs drawn besides the first divergence: names or stage kinds ("pv", "softmax[0]"),
  // as --snapshot-stages takes them.
  std::vector<std::string> stages;
  std::int64_t max_side = 0;  // grid cells a side; 0: 512 for up to 4 heads, else 256
};

// `references`: one per output, as judge_run fills them (empty entries: not compared).
HtmlCase case_figures(const AttentionInputs& inputs, const TraceRun& run, const CaseResult& result,
                      const std::vector<OutputReferences>& references, const FigureOptions& options);

// Which comparison a heatmap of output r shows: stage-local when it fails, as attribution
// takes it, else end to end (the table's err/bound column).
bool heatmap_uses_local(const OutputResult& r);

}  // namespace fc

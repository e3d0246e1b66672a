#pragma once
// Judging a case whose trace build runs in windows of query rows (stages/stage.h, RowWindow):
// how many rows a window takes, the rows of a sample each holds, how the windows' results
// fold into the case's, and which window a divergence is attributed on.
#include <cstdint>
#include <optional>
#include <vector>

#include "harness/trace/judge.h"

namespace fc {

// Query rows a window of `impl`'s trace build takes (a multiple of its query tile, or every row),
// or 0 when it runs whole: forced by options, or sized so that the window's buffers (and their
// copies kept on the device, when its captures do not stay in them) leave the device what the
// GPU reference holds and what a run keeping its captures needs free; whole only when the
// whole trace also fits a third of the host's memory, where attribution brings it.
std::int64_t window_rows_for(const Implementation& impl, const AttentionInputs& inputs, const StageGraph& graph,
                             const JudgeOptions& options, bool keep_references);

// The rows of `sample` in window w (every row of it for an unsampled judgement).
RowSample rows_in(const RowSample& sample, const Shape& shape, const RowWindow& w);

// Folds one window's results into the case's: metrics and flags over the elements of both (a
// production result's flags are those of its one whole run, the same in every window).
void fold_window(OutputResult& into, const OutputResult& next);

// The query row where attribution will look: the first output that failed (in graph order,
// as attribution goes), at the element it names first (the stage-local comparison's first
// over the deciding bound, else the end-to-end one's, else the first unwritten or NaN
// element). Nothing when that output failed without an element (never captured, or not as
// declared): any window shows that.
std::optional<std::int64_t> first_failing_row(const std::vector<OutputResult>& outputs);

// Rows a window traced again for attribution holds at most (fewer where a third of the host's
// memory holds fewer): attribution brings its captures to the host, and a window sized to the
// device would bring tens of GB.
constexpr std::int64_t kAttributionRows = 1024;
// The window traced again to attribute a divergence whose first failing row is `row`: from the
// query tile that holds it, at most max_rows in whole tiles (one tile at least).
RowWindow attribution_window(std::int64_t row, std::int64_t max_rows, std::int64_t query_tile, std::int64_t q_len);

// When the window traced again does not show the divergence the windows found (a race, say):
// the first failing output, named from the folded results.
Divergence unreproduced(const std::vector<OutputResult>& outputs);

// The trace build window by window: each window's captures judged (on the rows of the sample
// it holds) and dropped; the case's results folded over the windows; a divergence attributed
// on a window from its first failing row's tile (attribution_window), traced again.
Judged judge_in_windows(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                        const DeviceInputs* device, const JudgeOptions& options, std::int64_t window_rows);

}  // namespace fc

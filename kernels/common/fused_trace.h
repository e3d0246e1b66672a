#pragma once
// What every fused kernel with a trace build shares on the host: the blocked stage graph it
// declares (per tile qk, softmax, pv; then normalize, or per split partials and a combine),
// the trace buffers its trace build writes, and the captures of their slices in stage order.
#include "kernels/implementation.h"

namespace fc {

struct FusedLayout {
  Algorithm algorithm;        // blocked (one key range) or split
  std::int64_t tiles_per_split = 0;
  std::int64_t slots() const; // (split, tile) pairs the trace buffers hold
};

FusedLayout blocked_layout(const Shape& shape, std::int64_t tile_width);
FusedLayout split_layout(const Shape& shape, std::int64_t tile_width, std::int64_t splits);

// p_tilde: the format p~ is traced in; operand: what the P.V product rounds it to;
// log_scale: the factor from the kernel's traced scores and maxima to natural log (ln 2 for
// a kernel working in base 2); tensor_cores: the matmuls run on tensor cores; lse: the last
// stage (normalize or combine) also writes each row's log-sum-exp (fp32, natural log).
StageGraph fused_stage_graph(const Problem& problem, const FusedLayout& layout, DType p_tilde, DType operand,
                             double log_scale, bool tensor_cores, bool lse = false);

struct FusedTraceBuffers {
  Buffer* scores = nullptr;
  Buffer* p_tilde = nullptr;
  Buffer* row_max = nullptr;
  Buffer* row_sum = nullptr;
  Buffer* acc = nullptr;
  static std::size_t bytes(const Problem& problem, const FusedLayout& layout);
  // A trace build in `window` holds its rows alone.
  static FusedTraceBuffers allocate(Workspace& ws, const Problem& problem, const FusedLayout& layout,
                                    const RowWindow& window = {});
};

// The results after the tiles: the final output, or each split's partials then the output.
struct FusedResults {
  const Buffer* output = nullptr;
  const Buffer* partial_output = nullptr;  // split layouts
  const Buffer* partial_lse = nullptr;
  const Buffer* lse = nullptr;             // graphs with the final lse
};

// Captures every stage output of `graph` from the trace buffers and results, in order; the
// results only when there are no trace buffers (a production build's run).
// In `window`, every buffer holds the window's rows of each head.
void capture_fused(Tap& tap, const StageGraph& graph, const Shape& shape, const FusedLayout& layout,
                   const FusedTraceBuffers& trace, const FusedResults& results, const RowWindow& window = {});

}  // namespace fc

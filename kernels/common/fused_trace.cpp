#include "kernels/common/fused_trace.h"

#include <algorithm>

#include "core/error.h"

namespace fc {
namespace {
// Rows of every head, or of a window of each.
std::int64_t rows_of(const Shape& s, const RowWindow& window = {}) {
  return s.batch * s.heads * window.held(s.q_len);
}
}  // namespace

std::int64_t FusedLayout::slots() const {
  return (algorithm.kind == Algorithm::Kind::split ? algorithm.splits : 1) * tiles_per_split;
}

FusedLayout blocked_layout(const Shape& shape, std::int64_t tile_width) {
  FusedLayout l;
  l.algorithm = {Algorithm::Kind::blocked, tile_width, 0};
  l.tiles_per_split = tile_count(0, shape.kv_len, tile_width);
  return l;
}

FusedLayout split_layout(const Shape& shape, std::int64_t tile_width, std::int64_t splits) {
  FusedLayout l;
  l.algorithm = {Algorithm::Kind::split, tile_width, splits};
  const std::int64_t tiles = tile_count(0, shape.kv_len, tile_width);
  l.tiles_per_split = (tiles + splits - 1) / splits;
  return l;
}

StageGraph fused_stage_graph(const Problem& problem, const FusedLayout& layout, DType p_tilde, DType operand,
                             double log_scale, bool tensor_cores, bool lse) {
  const Shape& s = problem.shape;
  StageGraph g;
  g.algorithm = layout.algorithm;
  g.arithmetic = nominal_arithmetic(problem.dtype);
  g.arithmetic.softmax.out = p_tilde;
  g.arithmetic.pv.out = DType::f32;  // the accumulator stays in fp32 registers
  g.arithmetic.pv.operand = operand;
  g.arithmetic.qk.tensor_cores = g.arithmetic.pv.tensor_cores = tensor_cores;
  const bool split = layout.algorithm.kind == Algorithm::Kind::split;
  if (split) g.arithmetic.normalize.out = DType::f32;  // partial outputs
  const std::int64_t splits = split ? layout.algorithm.splits : 1;
  for (std::int64_t t = 0; t < splits; ++t) {
    const int split_index = split ? static_cast<int>(t) : -1;
    const KeyRange range = tile_columns(s, layout.algorithm, split_index, -1);
    const int tiles = static_cast<int>(tile_count(range.begin, range.end, layout.algorithm.tile_width));
    for (int j = 0; j < tiles; ++j) {
      g.stages.push_back({StageKind::qk, split_index, j, {{"", Quantity::scores, DType::f32, log_scale}}});
      g.stages.push_back({StageKind::softmax, split_index, j,
                          {{"", Quantity::p_tilde, p_tilde},
                           {"max", Quantity::row_max, DType::f32, log_scale},
                           {"sum", Quantity::row_sum, DType::f32}}});
      g.stages.push_back({StageKind::pv, split_index, j, {{"", Quantity::acc, DType::f32}}, j > 0});
    }
    if (split) {
      g.stages.push_back({StageKind::normalize, split_index, -1,
                          {{"", Quantity::partial_output, DType::f32}, {"lse", Quantity::partial_lse, DType::f32}}});
    }
  }
  if (split) {
    g.stages.push_back({StageKind::combine, -1, -1, {{"", Quantity::output, problem.dtype}}});
  } else {
    g.stages.push_back({StageKind::normalize, -1, -1, {{"", Quantity::output, problem.dtype}}});
  }
  if (lse) g.stages.back().outputs.push_back({"lse", Quantity::lse, DType::f32});
  return g;
}

std::size_t FusedTraceBuffers::bytes(const Problem& p, const FusedLayout& layout) {
  const std::int64_t rows = rows_of(p.shape) * layout.slots();
  return static_cast<std::size_t>(rows * (2 * layout.algorithm.tile_width + 2 + p.shape.head_dim)) * sizeof(float);
}

FusedTraceBuffers FusedTraceBuffers::allocate(Workspace& ws, const Problem& p, const FusedLayout& layout,
                                              const RowWindow& window) {
  const std::int64_t rows = rows_of(p.shape, window) * layout.slots();
  FusedTraceBuffers t;
  t.scores = &ws.allocate("trace_scores", DType::f32, rows * layout.algorithm.tile_width);
  t.p_tilde = &ws.allocate("trace_p_tilde", DType::f32, rows * layout.algorithm.tile_width);
  t.row_max = &ws.allocate("trace_row_max", DType::f32, rows);
  t.row_sum = &ws.allocate("trace_row_sum", DType::f32, rows);
  t.acc = &ws.allocate("trace_acc", DType::f32, rows * p.shape.head_dim);
  return t;
}

namespace {
// Slot s of a trace buffer: a dense [B,H,Sq,cols] block at s times the slot's full size.
TensorView slot_view(const Buffer& buffer, std::int64_t slot, std::int64_t slot_elements, Dims dims) {
  TensorView v = buffer.view(dims);
  v.data = static_cast<const std::uint8_t*>(buffer.data) + slot * slot_elements * dtype_size(buffer.dtype);
  if ((slot + 1) * slot_elements > buffer.count) throw Error("trace slot past the end of '" + buffer.name + "'");
  return v;
}
}  // namespace

void capture_fused(Tap& tap, const StageGraph& graph, const Shape& shape, const FusedLayout& layout,
                   const FusedTraceBuffers& trace, const FusedResults& results, const RowWindow& window) {
  const std::int64_t rows = rows_of(shape, window), width = layout.algorithm.tile_width;
  const Dims row_dims = windowed_dims({shape.batch, shape.heads, shape.q_len}, window);
  const Dims out_dims = windowed_dims({shape.batch, shape.heads, shape.q_len, shape.head_dim}, window);
  for (std::size_t i = 0; i < graph.stages.size(); ++i) {
    const Stage& st = graph.stages[i];
    const std::int64_t slot = std::max(st.split, 0) * layout.tiles_per_split + st.tile;
    if (st.tile >= 0) {
      if (!trace.scores) continue;
      const KeyRange cols = stage_columns(shape, graph.algorithm, st);
      const Dims tile_dims = windowed_dims({shape.batch, shape.heads, shape.q_len, cols.end - cols.begin}, window);
      switch (st.kind) {
        case StageKind::qk: tap.capture(i, 0, slot_view(*trace.scores, slot, rows * width, tile_dims)); break;
        case StageKind::softmax:
          tap.capture(i, 0, slot_view(*trace.p_tilde, slot, rows * width, tile_dims));
          tap.capture(i, 1, slot_view(*trace.row_max, slot, rows, row_dims));
          tap.capture(i, 2, slot_view(*trace.row_sum, slot, rows, row_dims));
          break;
        case StageKind::pv: tap.capture(i, 0, slot_view(*trace.acc, slot, rows * shape.head_dim, out_dims)); break;
        default: throw Error("fused trace: unexpected tiled stage " + st.name());
      }
      continue;
    }
    if (st.kind == StageKind::normalize && st.split >= 0) {
      tap.capture(i, 0, slot_view(*results.partial_output, st.split, rows * shape.head_dim, out_dims));
      tap.capture(i, 1, slot_view(*results.partial_lse, st.split, rows, row_dims));
    } else {
      tap.capture(i, 0, results.output->view(out_dims));
      if (st.outputs.size() > 1) tap.capture(i, 1, results.lse->view(row_dims));
    }
  }
}

}  // namespace fc

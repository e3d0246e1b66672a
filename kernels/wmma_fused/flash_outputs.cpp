#include "kernels/wmma_fused/flash_outputs.h"

#include "kernels/common/device_inputs.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {

StageGraph FlashOutputs::stage_graph(const Problem& p) {
  StageGraph g = fused_stage_graph(p, blocked_layout(p.shape, kFlashKeys), DType::f32, p.dtype, kFlashLogScale, true, true);
  g.query_tile = kFlashRows;
  return g;
}

std::size_t FlashOutputs::trace_bytes(const Problem& p) {
  return FusedTraceBuffers::bytes(p, blocked_layout(p.shape, kFlashKeys));
}

void FlashOutputs::prepare(const Problem& p, Workspace& ws, bool traced) {
  const Shape& s = p.shape;
  const RowWindow rows = traced ? window : RowWindow{};
  const std::int64_t held = s.batch * s.heads * (rows.whole() ? s.q_len : rows.rows);
  out = &ws.allocate("output", p.dtype, held * s.head_dim);
  lse = &ws.allocate("lse", DType::f32, held);
  trace = traced ? FusedTraceBuffers::allocate(ws, p, blocked_layout(s, kFlashKeys), rows) : FusedTraceBuffers{};
}

void FlashOutputs::bind(FlashParams& params, const Problem& problem, bool traced) const {
  params.out = out->data;
  params.lse = lse->as<float>();
  params.tiles_per_split = static_cast<int>(blocked_layout(problem.shape, kFlashKeys).tiles_per_split);
  if (!traced) return;
  params.trace = flash_trace(trace);
  if (!window.whole()) {
    params.trace.row_first = static_cast<int>(window.first);
    params.trace.row_count = static_cast<int>(window.rows);
  }
}

void FlashOutputs::capture(Tap& tap, const Problem& p, bool traced) const {
  capture_fused(tap, stage_graph(p), p.shape, blocked_layout(p.shape, kFlashKeys), trace, {out, nullptr, nullptr, lse},
                traced ? window : RowWindow{});
}

void read_input_layouts(FlashParams& params, const Problem& p, const DeviceInputs& in) {
  if (p.layout.varlen()) {
    params.q = in.packed_q();
    params.k = in.packed_k();
    params.v = in.packed_v();
    params.q_offsets = in.cu_seqlens_q();
    params.cu_seqlens_k = in.cu_seqlens_k();
  }
  if (p.layout.paged()) {
    params.k = in.k_cache();
    params.v = in.v_cache();
    params.block_table = in.block_table();
    params.block_table_stride = static_cast<int>(p.layout.max_blocks);
    int log2 = 0;
    while ((std::int64_t{1} << log2) < p.layout.block_size) ++log2;
    params.block_size_log2 = log2;
  }
}

}  // namespace fc

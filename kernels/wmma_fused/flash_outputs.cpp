#include "kernels/wmma_fused/flash_outputs.h"

#include "kernels/common/device_inputs.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {

StageGraph FlashOutputs::stage_graph(const Problem& p, int keys, int rows) {
  StageGraph g = fused_stage_graph(p, blocked_layout(p.shape, keys), DType::f32, p.dtype, kFlashLogScale, true, true);
  g.query_tile = rows;
  return g;
}

std::size_t FlashOutputs::trace_bytes(const Problem& p, int keys) {
  return FusedTraceBuffers::bytes(p, blocked_layout(p.shape, keys));
}

void FlashOutputs::prepare(const Problem& p, Workspace& ws, bool traced, int tile_keys, int block_rows) {
  const Shape& s = p.shape;
  keys = tile_keys;
  rows = block_rows;
  held = traced ? window : RowWindow{};
  const std::int64_t rows_held = s.batch * s.heads * held.held(s.q_len);
  out = &ws.allocate("output", p.dtype, rows_held * s.head_dim);
  lse = &ws.allocate("lse", DType::f32, rows_held);
  trace = traced ? FusedTraceBuffers::allocate(ws, p, blocked_layout(s, keys), held) : FusedTraceBuffers{};
}

void FlashOutputs::bind(FlashParams& params, const Problem& problem, bool traced) const {
  params.out = out->data;
  params.lse = lse->as<float>();
  params.tiles_per_split = static_cast<int>(blocked_layout(problem.shape, keys).tiles_per_split);
  if (!traced) return;
  params.trace = flash_trace(trace);
  if (!held.whole()) {
    params.trace.row_first = static_cast<int>(held.first);
    params.trace.row_count = static_cast<int>(held.rows);
  }
}

void FlashOutputs::capture(Tap& tap, const Problem& p) const {
  capture_fused(tap, stage_graph(p, keys, rows), p.shape, blocked_layout(p.shape, keys), trace, {out, nullptr, nullptr, lse},
                held);
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

std::optional<std::string> paged_blocks_unsupported(const Problem& p, std::int64_t min_keys, const std::string& why_min) {
  if (!p.layout.paged()) return std::nullopt;
  const std::int64_t bs = p.layout.block_size;
  if ((bs & (bs - 1)) != 0) return "paged KV block size " + std::to_string(bs) + " is not a power of two";
  if (bs < min_keys) {
    return "paged KV block size " + std::to_string(bs) + " is under " + std::to_string(min_keys) + " keys: " + why_min;
  }
  return std::nullopt;
}

FlashParams FlashImplementation::launch_params(const RunContext& ctx) const {
  const Problem& p = ctx.inputs.problem;
  FlashParams params = flash_params(p, *ctx.device);
  outputs_.bind(params, p, ctx.traced());
  params.production_scaled = faulty("production-epilogue-scale");
  read_input_layouts(params, p, *ctx.device);
  return params;
}

void FlashImplementation::capture(const RunContext& ctx) const {
  if (ctx.tap) outputs_.capture(*ctx.tap, ctx.inputs.problem);
}

}  // namespace fc

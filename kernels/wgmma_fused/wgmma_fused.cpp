// wgmma-fused: flash attention for Hopper (sm_90a): TMA loads into 128-byte-swizzled shared
// memory, wgmma for Q K^T and P V, a producer warpgroup and two consumer warpgroups handing
// tiles over through mbarriers (kernels/wgmma_fused/wgmma_forward.cuh). The algorithm, tile
// shape, stage graph and trace buffers are wmma-fused's, so both are judged against the
// same blocked reference, tile by tile.
#include "kernels/wgmma_fused/wgmma_fused.h"

#include "kernels/common/device_inputs.h"
#include "kernels/common/fused_trace.h"
#include "kernels/wgmma_fused/wgmma_launch.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {
namespace {

class WgmmaFused final : public Implementation {
 public:
  std::string name() const override { return "wgmma-fused"; }
  std::string summary() const override {
    return "GPU sm_90a, fused flash attention: TMA, wgmma, a producer and two consumer warpgroups synchronized by "
           "mbarriers, 128 rows x 64 keys a tile, online softmax in registers, lse; padded or packed varlen inputs, "
           "the paged KV cache (blocks of 8 keys or more); D 64 and 128";
  }
  bool on_gpu() const override { return true; }
  std::vector<std::string> faults() const override {
    return {"missing-mbarrier-wait", "mbarrier-wrong-phase", "production-epilogue-scale"};
  }
  std::optional<std::string> unsupported(const Problem& p) const override { return wgmma_unsupported(p); }
  StageGraph stage_graph(const Problem& p) const override {
    StageGraph g = fused_stage_graph(p, blocked_layout(p.shape, kFlashKeys), DType::f32, p.dtype, kFlashLogScale, true, true);
    g.query_tile = kFlashRows;
    return g;
  }
  std::size_t trace_bytes(const Problem& p) const override {
    return FusedTraceBuffers::bytes(p, blocked_layout(p.shape, kFlashKeys));
  }
  void prepare(const Problem& p, Workspace& ws, bool traced) override {
    const Shape& s = p.shape;
    out_ = &ws.allocate("output", p.dtype, s.batch * s.heads * s.q_len * s.head_dim);
    lse_ = &ws.allocate("lse", DType::f32, s.batch * s.heads * s.q_len);
    trace_ = traced ? FusedTraceBuffers::allocate(ws, p, blocked_layout(s, kFlashKeys)) : FusedTraceBuffers{};
  }
  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    FlashParams params = flash_params(p, *ctx.device);
    params.out = out_->data;
    params.lse = lse_->as<float>();
    params.tiles_per_split = static_cast<int>(blocked_layout(s, kFlashKeys).tiles_per_split);
    params.production_scaled = faulty("production-epilogue-scale");
    InputExtents extents;
    const DeviceInputs& in = *ctx.device;
    const std::size_t row = static_cast<std::size_t>(s.head_dim) * 2;
    if (p.layout.varlen()) {  // the packed q, k, v at their cu_seqlens offsets
      params.q = in.packed_q();
      params.k = in.packed_k();
      params.v = in.packed_v();
      params.q_offsets = in.cu_seqlens_q();
      params.cu_seqlens_k = in.cu_seqlens_k();
      extents.q_rows = static_cast<std::int64_t>(in.packed_q_bytes() / (row * s.heads));
      extents.kv_rows = static_cast<std::int64_t>(in.packed_k_bytes() / (row * s.kv_head_count()));
    }
    if (p.layout.paged()) {  // K and V from the cache, through the block table
      params.k = in.k_cache();
      params.v = in.v_cache();
      params.block_table = in.block_table();
      params.block_table_stride = static_cast<int>(p.layout.max_blocks);
      int log2 = 0;
      while ((std::int64_t{1} << log2) < p.layout.block_size) ++log2;
      params.block_size_log2 = log2;
      extents.cache_blocks = p.layout.num_blocks;
    }
    WgmmaVariant variant;
    if (faulty("missing-mbarrier-wait")) variant.fault = PipelineFault::missing_wait;
    if (faulty("mbarrier-wrong-phase")) variant.fault = PipelineFault::wrong_phase;
    if (ctx.traced()) {
      variant.trace = true;
      params.trace = flash_trace(trace_);
    }
    launch_wgmma_forward(params, static_cast<int>(s.head_dim), p.dtype, variant, extents, ctx.stream);
    if (ctx.tap) {
      capture_fused(*ctx.tap, stage_graph(p), s, blocked_layout(s, kFlashKeys), trace_, {out_, nullptr, nullptr, lse_});
    }
  }

 private:
  Buffer *out_ = nullptr, *lse_ = nullptr;
  FusedTraceBuffers trace_;
};

}  // namespace

std::unique_ptr<Implementation> make_wgmma_fused() { return std::make_unique<WgmmaFused>(); }

}  // namespace fc

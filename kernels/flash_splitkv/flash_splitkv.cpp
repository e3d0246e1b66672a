// flash-splitkv: the fused tensor-core kernel over splits of the keys (pass 1: per split a
// partial output normalized by its own sum, and its log-sum-exp), then a combine by
// log-sum-exp (pass 2). A split whose every key is masked gets weight 0.
#include <algorithm>

#include "kernels/common/device_inputs.h"
#include "kernels/common/fused_trace.h"
#include "kernels/flash_splitkv/combine.h"
#include "kernels/flash_splitkv/flash_splitkv.h"
#include "kernels/wmma_fused/flash_launch.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {
namespace {

// Enough blocks for about two waves of a 132-SM GPU, at least 2 splits when there are 2
// tiles (so the combine always runs), at most 16. A function of the shape alone: the stage
// graph must not depend on the machine.
std::int64_t choose_splits(const Shape& s) {
  const std::int64_t tiles = tile_count(0, s.kv_len, kFlashKeys);
  const std::int64_t blocks = s.batch * s.heads * ((s.q_len + kFlashRows - 1) / kFlashRows);
  const std::int64_t wanted = std::max<std::int64_t>(2, (264 + blocks - 1) / blocks);
  return std::max<std::int64_t>(1, std::min<std::int64_t>({wanted, tiles, 16}));
}

class FlashSplitKv final : public Implementation {
 public:
  std::string name() const override { return "flash-splitkv"; }
  std::string summary() const override {
    return "GPU, split-KV flash attention: per split a partial output and lse on tensor cores, then an lse "
           "combine (output and lse); D 32, 64, 96, 128, 256";
  }
  bool on_gpu() const override { return true; }
  std::vector<std::string> faults() const override {
    return {"splitk-partial-scale", "combine-empty-split", "production-epilogue-scale"};
  }
  std::optional<std::string> unsupported(const Problem& p) const override { return flash_unsupported(p); }
  StageGraph stage_graph(const Problem& p) const override {
    StageGraph g = fused_stage_graph(p, layout(p.shape), DType::f32, p.dtype, kFlashLogScale, true, true);
    g.query_tile = kFlashRows;
    return g;
  }
  std::size_t trace_bytes(const Problem& p) const override { return FusedTraceBuffers::bytes(p, layout(p.shape)); }
  void prepare(const Problem& p, Workspace& ws, bool traced) override {
    const Shape& s = p.shape;
    const std::int64_t rows = s.batch * s.heads * s.q_len, splits = layout(s).algorithm.splits;
    partial_out_ = &ws.allocate("partial_output", DType::f32, splits * rows * s.head_dim);
    partial_lse_ = &ws.allocate("partial_lse", DType::f32, splits * rows);
    out_ = &ws.allocate("output", p.dtype, rows * s.head_dim);
    lse_ = &ws.allocate("lse", DType::f32, rows);
    trace_ = traced ? FusedTraceBuffers::allocate(ws, p, layout(s)) : FusedTraceBuffers{};
  }
  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    const FusedLayout l = layout(s);
    FlashParams params = flash_params(p, *ctx.device);
    params.partial_out = partial_out_->as<float>();
    params.partial_lse = partial_lse_->as<float>();
    params.splits = static_cast<int>(l.algorithm.splits);
    params.tiles_per_split = static_cast<int>(l.tiles_per_split);
    params.partial_unnormalized = faulty("splitk-partial-scale");
    params.production_scaled = faulty("production-epilogue-scale");
    FlashVariant variant;
    variant.split = true;
    if (ctx.traced()) {
      variant.trace = true;
      params.trace = flash_trace(trace_);
    }
    launch_flash_forward(params, static_cast<int>(s.head_dim), p.dtype, variant, ctx.stream);
    launch_combine(partial_out_->as<float>(), partial_lse_->as<float>(), params.splits,
                   s.batch * s.heads * s.q_len, static_cast<int>(s.head_dim), p.dtype, out_->data, lse_->as<float>(),
                   !faulty("combine-empty-split"), ctx.stream);
    if (ctx.tap) capture_fused(*ctx.tap, stage_graph(p), s, l, trace_, {out_, partial_out_, partial_lse_, lse_});
  }

 private:
  static FusedLayout layout(const Shape& s) { return split_layout(s, kFlashKeys, choose_splits(s)); }
  Buffer *partial_out_ = nullptr, *partial_lse_ = nullptr, *out_ = nullptr, *lse_ = nullptr;
  FusedTraceBuffers trace_;
};

}  // namespace

std::unique_ptr<Implementation> make_flash_splitkv() { return std::make_unique<FlashSplitKv>(); }

}  // namespace fc

// wmma-fused: flash attention on tensor cores (mma.sync, fp16/bf16 in, fp32 accumulate),
// online softmax over tiles of 64 keys, P kept in registers. Its trace build writes each
// tile's scores, p~ (fp32, before rounding for the MMA), running max and sum, and the
// accumulator, checked against the blocked reference with the same tile width.
#include "kernels/common/device_inputs.h"
#include "kernels/common/fused_trace.h"
#include "kernels/wmma_fused/flash_launch.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {
namespace {

class WmmaFused final : public Implementation {
 public:
  std::string name() const override { return "wmma-fused"; }
  std::string summary() const override {
    return "GPU, fused flash attention on tensor cores (mma.sync m16n8k16), 128 rows x 64 keys a tile, "
           "online softmax in registers; D 64 and 128";
  }
  bool on_gpu() const override { return true; }
  std::vector<std::string> faults() const override { return {"missing-sync", "production-epilogue-scale"}; }
  std::optional<std::string> unsupported(const Problem& p) const override {
    if (!flash_supports_head_dim(static_cast<int>(p.shape.head_dim))) return "head dim must be 64 or 128";
    return std::nullopt;
  }
  StageGraph stage_graph(const Problem& p) const override {
    return fused_stage_graph(p, blocked_layout(p.shape, kFlashKeys), DType::f32, p.dtype, kFlashLogScale, true);
  }
  std::size_t trace_bytes(const Problem& p) const override {
    return FusedTraceBuffers::bytes(p, blocked_layout(p.shape, kFlashKeys));
  }
  void prepare(const Problem& p, Workspace& ws, bool traced) override {
    const Shape& s = p.shape;
    out_ = &ws.allocate("output", p.dtype, s.batch * s.heads * s.q_len * s.head_dim);
    trace_ = traced ? FusedTraceBuffers::allocate(ws, p, blocked_layout(s, kFlashKeys)) : FusedTraceBuffers{};
  }
  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    const FusedLayout layout = blocked_layout(s, kFlashKeys);
    FlashParams params = flash_params(p, *ctx.device);
    params.out = out_->data;
    params.tiles_per_split = static_cast<int>(layout.tiles_per_split);
    params.production_scaled = faulty("production-epilogue-scale");
    FlashVariant variant;
    variant.missing_sync = faulty("missing-sync");
    if (ctx.traced()) {
      variant.trace = true;
      params.trace = flash_trace(trace_);
    }
    launch_flash_forward(params, static_cast<int>(s.head_dim), p.dtype, variant, ctx.stream);
    if (ctx.tap) capture_fused(*ctx.tap, stage_graph(p), s, layout, trace_, {out_, nullptr, nullptr});
  }

 private:
  Buffer* out_ = nullptr;
  FusedTraceBuffers trace_;
};

}  // namespace

FlashParams flash_params(const Problem& p, const DeviceInputs& in) {
  FlashParams params;
  params.q = in.q();
  params.k = in.k();
  params.v = in.v();
  params.batch = static_cast<int>(p.shape.batch);
  params.heads = static_cast<int>(p.shape.heads);
  params.q_len = static_cast<int>(p.shape.q_len);
  params.kv_len = static_cast<int>(p.shape.kv_len);
  params.scale_log2 = static_cast<float>(p.scale * 1.4426950408889634);
  params.mask = in.mask();
  params.has_mask = in.has_mask();
  return params;
}

FlashTrace flash_trace(const FusedTraceBuffers& t) {
  return {t.scores->as<float>(), t.p_tilde->as<float>(), t.row_max->as<float>(), t.row_sum->as<float>(),
          t.acc->as<float>()};
}

std::unique_ptr<Implementation> make_wmma_fused() { return std::make_unique<WmmaFused>(); }

}  // namespace fc

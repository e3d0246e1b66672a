// fa1-scalar: scalar flash attention (one thread per query row, tiles of 32 keys, online
// softmax in fp32). A correctness baseline for the fused kernels, traced the same way.
#include "kernels/common/device_inputs.h"
#include "kernels/common/fused_trace.h"
#include "kernels/fa1_scalar/fa1_kernel.h"
#include "kernels/fa1_scalar/fa1_scalar.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {
namespace {

class Fa1Scalar final : public Implementation {
 public:
  std::string name() const override { return "fa1-scalar"; }
  std::string summary() const override {
    return "GPU, scalar flash attention: a thread per query row, tiles of 32 keys, fp32 online softmax "
           "(correctness baseline); D up to 256";
  }
  bool on_gpu() const override { return true; }
  std::optional<std::string> unsupported(const Problem& p) const override {
    if (p.shape.head_dim > 256) return "head dim above 256";
    return std::nullopt;
  }
  StageGraph stage_graph(const Problem& p) const override {
    StageGraph g = fused_stage_graph(p, blocked_layout(p.shape, kFa1Keys), DType::f32, DType::f32, 1.0, false);
    g.query_tile = 64;  // a block's rows, one a thread
    return g;
  }
  std::size_t trace_bytes(const Problem& p) const override {
    return FusedTraceBuffers::bytes(p, blocked_layout(p.shape, kFa1Keys));
  }
  void prepare(const Problem& p, Workspace& ws, bool traced) override {
    const Shape& s = p.shape;
    out_ = &ws.allocate("output", p.dtype, s.batch * s.heads * s.q_len * s.head_dim);
    trace_ = traced ? FusedTraceBuffers::allocate(ws, p, blocked_layout(s, kFa1Keys)) : FusedTraceBuffers{};
  }
  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    FlashParams params = flash_params(p, *ctx.device);
    params.out = out_->data;
    if (ctx.traced()) params.trace = flash_trace(trace_);
    launch_fa1(params, static_cast<int>(p.shape.head_dim), p.dtype, ctx.traced(), ctx.stream);
    if (ctx.tap) {
      capture_fused(*ctx.tap, stage_graph(p), p.shape, blocked_layout(p.shape, kFa1Keys), trace_, {out_, nullptr, nullptr});
    }
  }

 private:
  Buffer* out_ = nullptr;
  FusedTraceBuffers trace_;
};

}  // namespace

std::unique_ptr<Implementation> make_fa1_scalar() { return std::make_unique<Fa1Scalar>(); }

}  // namespace fc

// wmma-fused: flash attention on tensor cores (mma.sync, fp16/bf16 in, fp32 accumulate),
// online softmax over tiles of 64 keys, P kept in registers, the row's lse written beside the
// output. It reads the inputs as FlashAttention's varlen and KV-cache kernels do: packed q, k,
// v at their cu_seqlens offsets, K and V from the paged cache through the block table. Its
// trace build writes each tile's scores, p~ (fp32, before rounding for the MMA), running max
// and sum, and the accumulator, checked against the blocked reference with the same tile width.
#include <algorithm>

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
           "online softmax in registers, lse; reads packed varlen inputs and the paged KV cache; D 32, 64, 96, 128, 256";
  }
  bool on_gpu() const override { return true; }
  std::vector<std::string> faults() const override {
    return {"missing-sync", "varlen-cu-seqlens", "block-table-stride", "production-epilogue-scale"};
  }
  std::optional<std::string> unsupported(const Problem& p) const override {
    if (const auto why = flash_unsupported(p)) return why;
    const std::int64_t bs = p.layout.block_size;
    if (p.layout.paged() && (bs & (bs - 1)) != 0) {
      return "paged KV block size " + std::to_string(bs) + " is not a power of two";
    }
    return std::nullopt;
  }
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
    const FusedLayout layout = blocked_layout(s, kFlashKeys);
    const DeviceInputs& in = *ctx.device;
    FlashParams params = flash_params(p, in);
    params.out = out_->data;
    params.lse = lse_->as<float>();
    params.tiles_per_split = static_cast<int>(layout.tiles_per_split);
    params.production_scaled = faulty("production-epilogue-scale");
    FlashVariant variant;
    variant.missing_sync = faulty("missing-sync");
    if (p.layout.varlen()) {  // the packed q, k, v; varlen-cu-seqlens reads the query rows at the key offsets
      params.q = in.packed_q();
      params.k = in.packed_k();
      params.v = in.packed_v();
      params.q_offsets = faulty("varlen-cu-seqlens") ? in.cu_seqlens_k() : in.cu_seqlens_q();
      params.cu_seqlens_k = in.cu_seqlens_k();
    }
    if (p.layout.paged()) {  // block-table-stride reads the table's rows max_blocks - 1 apart
      params.k = in.k_cache();
      params.v = in.v_cache();
      params.block_table = in.block_table();
      params.block_table_stride = static_cast<int>(p.layout.max_blocks - (faulty("block-table-stride") ? 1 : 0));
      int log2 = 0;
      while ((std::int64_t{1} << log2) < p.layout.block_size) ++log2;
      params.block_size_log2 = log2;
      variant.paged = true;
    }
    if (ctx.traced()) {
      variant.trace = true;
      params.trace = flash_trace(trace_);
    }
    launch_flash_forward(params, static_cast<int>(s.head_dim), p.dtype, variant, ctx.stream);
    if (ctx.tap) capture_fused(*ctx.tap, stage_graph(p), s, layout, trace_, {out_, nullptr, nullptr, lse_});
  }

 private:
  Buffer *out_ = nullptr, *lse_ = nullptr;
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
  params.kv_heads = static_cast<int>(p.shape.kv_head_count());
  if (p.softcap > 0) {
    params.softcap = static_cast<float>(p.softcap);
    params.softcap_scale = static_cast<float>(p.scale / p.softcap);
    params.softcap_log2 = static_cast<float>(p.softcap * 1.4426950408889634);
  }
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

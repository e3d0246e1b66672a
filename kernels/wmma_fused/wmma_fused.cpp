// wmma-fused: flash attention on tensor cores (mma.sync, fp16/bf16 in, fp32 accumulate),
// online softmax over tiles of 64 keys, P kept in registers, the row's lse written beside the
// output. It reads the inputs as FlashAttention's varlen and KV-cache kernels do: packed q, k,
// v at their cu_seqlens offsets, K and V from the paged cache through the block table. Its
// trace build writes each tile's scores, p~ (fp32, before rounding for the MMA), running max
// and sum, and the accumulator, checked against the blocked reference with the same tile width.
#include "kernels/common/device_inputs.h"
#include "kernels/wmma_fused/flash_outputs.h"
#include "kernels/wmma_fused/flash_launch.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {
namespace {

class WmmaFused final : public FlashImplementation {
 public:
  std::string name() const override { return "wmma-fused"; }
  std::string summary() const override {
    return "GPU, fused flash attention on tensor cores (mma.sync m16n8k16), 128 rows x 64 keys a tile, "
           "online softmax in registers, lse; reads packed varlen inputs and the paged KV cache; D 32, 64, 96, 128, 256";
  }
  std::vector<std::string> faults() const override {
    return {"missing-sync", "varlen-cu-seqlens", "block-table-stride", "production-epilogue-scale"};
  }
  std::optional<std::string> unsupported(const Problem& p) const override {
    if (const auto why = flash_unsupported(p)) return why;
    return paged_blocks_unsupported(p);
  }
  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    FlashParams params = launch_params(ctx);
    // varlen-cu-seqlens reads the query rows at the key offsets; block-table-stride reads the
    // table's rows max_blocks - 1 apart.
    if (p.layout.varlen() && faulty("varlen-cu-seqlens")) params.q_offsets = ctx.device->cu_seqlens_k();
    if (p.layout.paged() && faulty("block-table-stride")) params.block_table_stride -= 1;
    FlashVariant variant;
    variant.missing_sync = faulty("missing-sync");
    variant.paged = p.layout.paged();
    variant.trace = ctx.traced();
    launch_flash_forward(params, static_cast<int>(p.shape.head_dim), p.dtype, variant, ctx.stream);
    capture(ctx);
  }
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

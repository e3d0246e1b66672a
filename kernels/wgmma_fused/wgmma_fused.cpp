// wgmma-fused: flash attention for Hopper (sm_90a): TMA loads into 128-byte-swizzled shared
// memory, wgmma for Q K^T and P V, a producer warpgroup and three (D 64) or two (D 128)
// consumer warpgroups handing tiles over through mbarriers (kernels/wgmma_fused/wgmma_forward.cuh). The algorithm, stage
// graph and trace buffers are wmma-fused's with tiles of 128 keys (kWgmmaKeys) where it has
// 64, both judged against the blocked reference of their tile width, tile by tile.
#include "kernels/wgmma_fused/wgmma_fused.h"

#include "kernels/common/device_inputs.h"
#include "kernels/wmma_fused/flash_outputs.h"
#include "kernels/wgmma_fused/wgmma_launch.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {
namespace {

class WgmmaFused final : public FlashImplementation {
 public:
  std::string name() const override { return "wgmma-fused"; }
  std::string summary() const override {
    return "GPU sm_90a, fused flash attention: TMA, wgmma, a producer and three (D 64) or two (D 128) consumer "
           "warpgroups synchronized by mbarriers, 192 or 128 rows x 128 keys a tile, online softmax in registers, lse; "
           "padded or packed varlen inputs, the paged KV cache (blocks of 8 keys or more); D 64 and 128";
  }
  std::vector<std::string> faults() const override {
    return {"missing-mbarrier-wait", "mbarrier-wrong-phase", "production-epilogue-scale"};
  }
  std::optional<std::string> unsupported(const Problem& p) const override { return wgmma_unsupported(p); }
  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    const DeviceInputs& in = *ctx.device;
    const FlashParams params = launch_params(ctx);
    InputExtents extents;  // what the tensor maps span
    const std::size_t row = static_cast<std::size_t>(s.head_dim) * 2;
    if (p.layout.varlen()) {
      extents.q_rows = static_cast<std::int64_t>(in.packed_q_bytes() / (row * s.heads));
      extents.kv_rows = static_cast<std::int64_t>(in.packed_k_bytes() / (row * s.kv_head_count()));
    }
    if (p.layout.paged()) extents.cache_blocks = p.layout.num_blocks;
    WgmmaVariant variant;
    if (faulty("missing-mbarrier-wait")) variant.fault = PipelineFault::missing_wait;
    if (faulty("mbarrier-wrong-phase")) variant.fault = PipelineFault::wrong_phase;
    variant.trace = ctx.traced();
    launch_wgmma_forward(params, static_cast<int>(s.head_dim), p.dtype, variant, extents, ctx.stream);
    capture(ctx);
  }

 protected:
  int key_tile(const Problem&) const override { return kWgmmaKeys; }
  int query_tile(const Problem& p) const override { return wgmma_rows(p.shape.head_dim); }
};

}  // namespace

std::unique_ptr<Implementation> make_wgmma_fused() { return std::make_unique<WgmmaFused>(); }

}  // namespace fc

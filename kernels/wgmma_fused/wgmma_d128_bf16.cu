#include "kernels/wgmma_fused/wgmma_instances.cuh"

namespace fc::wgmma_detail {
void launch_d128_bf16(const FlashParams& p, const WgmmaMaps& maps, WgmmaVariant v, cudaStream_t stream) {
  launch_for<128, __nv_bfloat16>(p, maps, v, stream);
}
}  // namespace fc::wgmma_detail

#include "kernels/wmma_fused/flash_instances.cuh"

namespace fc::flash_detail {
void launch_d96_bf16(const FlashParams& p, FlashVariant v, cudaStream_t stream) { launch_for<96, __nv_bfloat16>(p, v, stream); }
}  // namespace fc::flash_detail

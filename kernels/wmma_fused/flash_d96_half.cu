#include "kernels/wmma_fused/flash_instances.cuh"

namespace fc::flash_detail {
void launch_d96_half(const FlashParams& p, FlashVariant v, cudaStream_t stream) { launch_for<96, __half>(p, v, stream); }
}  // namespace fc::flash_detail

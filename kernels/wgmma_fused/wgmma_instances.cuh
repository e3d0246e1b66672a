#pragma once
// Instantiates wgmma-fused's kernel for one head dim and element type (one .cu file each, so
// that they compile in parallel). The pipeline faults are built at D = 64 only.
#include "core/check.h"
#include "core/error.h"
#include "kernels/wgmma_fused/wgmma_forward.cuh"
#include "kernels/wgmma_fused/wgmma_launch.h"

namespace fc::wgmma_detail {

template <int D, class T, bool kTrace, PipelineFault kFault>
void launch_variant(const FlashParams& p, const WgmmaMaps& maps, cudaStream_t stream) {
  constexpr int kSmem = SharedLayout<D>::kBytes;
  auto kernel = wgmma_forward_kernel<D, T, kTrace, kFault>;
  static const bool configured = [&] {
    FC_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)configured;
  constexpr int kRows = kWgmmaRows<D>;
  const dim3 grid((p.q_len + kRows - 1) / kRows, p.batch * p.heads);
  kernel<<<grid, kWgmmaThreads<D>, kSmem, stream>>>(p, maps);
  FC_CUDA_LAUNCH();
}

template <int D, class T>
void launch_for(const FlashParams& p, const WgmmaMaps& maps, WgmmaVariant v, cudaStream_t stream) {
  if (v.fault != PipelineFault::none) {
    if constexpr (D == 64) {
      if (v.fault == PipelineFault::missing_wait) {
        return v.trace ? launch_variant<D, T, true, PipelineFault::missing_wait>(p, maps, stream)
                       : launch_variant<D, T, false, PipelineFault::missing_wait>(p, maps, stream);
      }
      return v.trace ? launch_variant<D, T, true, PipelineFault::wrong_phase>(p, maps, stream)
                     : launch_variant<D, T, false, PipelineFault::wrong_phase>(p, maps, stream);
    }
    throw Error("wgmma-fused: the pipeline faults are built at head dim 64 only");
  }
  if (v.trace) launch_variant<D, T, true, PipelineFault::none>(p, maps, stream);
  else launch_variant<D, T, false, PipelineFault::none>(p, maps, stream);
}

}  // namespace fc::wgmma_detail

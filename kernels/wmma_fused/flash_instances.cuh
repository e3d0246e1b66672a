#pragma once
// Instantiates the fused kernel's variants for one head dim and element type; one .cu file
// per pair so they compile in parallel. The missing-sync fault is built at D = 64 only (its
// trigger case's head dim), the paged variant for the single-split kernel only.
#include "core/check.h"
#include "core/error.h"
#include "kernels/wmma_fused/flash_forward.cuh"
#include "kernels/wmma_fused/flash_launch.h"

namespace fc::flash_detail {

template <int D, class T, bool kTrace, bool kSplit, bool kMissingSync, bool kPaged>
void launch_variant(const FlashParams& p, cudaStream_t stream) {
  constexpr int kSmem = (kFlashRows + 4 * kFlashKeys) * D * static_cast<int>(sizeof(T));
  auto kernel = flash_forward_kernel<D, T, kTrace, kSplit, kMissingSync, kPaged>;
  static const bool configured = [&] {
    FC_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)configured;
  const dim3 grid((p.q_len + kFlashRows - 1) / kFlashRows, p.batch * p.heads, p.splits);
  kernel<<<grid, kFlashThreads, kSmem, stream>>>(p);
  FC_CUDA_LAUNCH();
}

template <int D, class T>
void launch_for(const FlashParams& p, FlashVariant v, cudaStream_t stream) {
  if (v.missing_sync) {
    if (v.split || v.paged) throw Error("the missing-sync fault applies to the single-split, unpaged kernel only");
    if constexpr (D == 64) {
      if (v.trace) launch_variant<D, T, true, false, true, false>(p, stream);
      else launch_variant<D, T, false, false, true, false>(p, stream);
      return;
    }
    throw Error("the missing-sync fault is built at head dim 64 only");
  }
  if (v.paged) {
    if (v.split) throw Error("the paged KV variant is built for the single-split kernel only");
    if (v.trace) launch_variant<D, T, true, false, false, true>(p, stream);
    else launch_variant<D, T, false, false, false, true>(p, stream);
    return;
  }
  if (v.trace && v.split) launch_variant<D, T, true, true, false, false>(p, stream);
  else if (v.trace) launch_variant<D, T, true, false, false, false>(p, stream);
  else if (v.split) launch_variant<D, T, false, true, false, false>(p, stream);
  else launch_variant<D, T, false, false, false, false>(p, stream);
}

}  // namespace fc::flash_detail

#include "kernels/wmma_fused/flash_launch.h"

#include <string>

#include "core/error.h"

namespace fc {
namespace flash_detail {
void launch_d64_half(const FlashParams&, FlashVariant, cudaStream_t);
void launch_d64_bf16(const FlashParams&, FlashVariant, cudaStream_t);
void launch_d128_half(const FlashParams&, FlashVariant, cudaStream_t);
void launch_d128_bf16(const FlashParams&, FlashVariant, cudaStream_t);
}  // namespace flash_detail

bool flash_supports_head_dim(int head_dim) { return head_dim == 64 || head_dim == 128; }

void launch_flash_forward(const FlashParams& p, int head_dim, DType dtype, FlashVariant v, cudaStream_t stream) {
  using namespace flash_detail;
  const bool half = dtype == DType::f16;
  if (dtype != DType::f16 && dtype != DType::bf16) throw Error("fused kernel: inputs must be fp16 or bf16");
  if (head_dim == 64) return half ? launch_d64_half(p, v, stream) : launch_d64_bf16(p, v, stream);
  if (head_dim == 128) return half ? launch_d128_half(p, v, stream) : launch_d128_bf16(p, v, stream);
  throw Error("fused kernel: head dim " + std::to_string(head_dim) + " not built (64, 128)");
}

}  // namespace fc

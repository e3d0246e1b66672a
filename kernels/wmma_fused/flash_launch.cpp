#include "kernels/wmma_fused/flash_launch.h"

#include <cfloat>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/numeric.h"

namespace fc {
namespace flash_detail {
#define FC_FLASH_INSTANCE(d)                                                   \
  void launch_d##d##_half(const FlashParams&, FlashVariant, cudaStream_t);     \
  void launch_d##d##_bf16(const FlashParams&, FlashVariant, cudaStream_t);
FC_FLASH_INSTANCE(32)
FC_FLASH_INSTANCE(64)
FC_FLASH_INSTANCE(96)
FC_FLASH_INSTANCE(128)
FC_FLASH_INSTANCE(256)
#undef FC_FLASH_INSTANCE
}  // namespace flash_detail

bool flash_supports_head_dim(int d) { return d == 32 || d == 64 || d == 96 || d == 128 || d == 256; }

std::optional<std::string> flash_unsupported(const Problem& p) {
  if (!flash_supports_head_dim(static_cast<int>(p.shape.head_dim))) {
    return "head dim " + std::to_string(p.shape.head_dim) + " not built (32, 64, 96, 128, 256)";
  }
  if (p.mask.has_alibi()) return "ALiBi is not built into the fused kernels (naive, fa1-scalar and the others have it)";
  if (p.mask.dense_is_bias()) {
    const double floor = -FLT_MAX * kFlashLogScale;
    for (std::int64_t i = 0; i < p.mask.dense.numel(); ++i) {
      const double bias = p.mask.dense.get(i);
      if (std::isfinite(bias) && bias < floor) {
        return "a finite bias of " + number_text(bias) + " is below -FLT_MAX ln 2 (" + number_text(floor) +
               "): the kernel's base-2 fp32 scores cannot hold it";
      }
    }
  }
  return std::nullopt;
}

void launch_flash_forward(const FlashParams& p, int head_dim, DType dtype, FlashVariant v, cudaStream_t stream) {
  using namespace flash_detail;
  if (dtype != DType::f16 && dtype != DType::bf16) throw Error("fused kernel: inputs must be fp16 or bf16");
  const bool half = dtype == DType::f16;
  switch (head_dim) {
    case 32: return half ? launch_d32_half(p, v, stream) : launch_d32_bf16(p, v, stream);
    case 64: return half ? launch_d64_half(p, v, stream) : launch_d64_bf16(p, v, stream);
    case 96: return half ? launch_d96_half(p, v, stream) : launch_d96_bf16(p, v, stream);
    case 128: return half ? launch_d128_half(p, v, stream) : launch_d128_bf16(p, v, stream);
    case 256: return half ? launch_d256_half(p, v, stream) : launch_d256_bf16(p, v, stream);
    default: break;
  }
  throw Error("fused kernel: head dim " + std::to_string(head_dim) + " not built (32, 64, 96, 128, 256)");
}

}  // namespace fc

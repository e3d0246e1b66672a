#include "kernels/wgmma_fused/wgmma_launch.h"

#include <cudaTypedefs.h>

#include <array>

#include "core/check.h"
#include "core/error.h"
#include "kernels/wmma_fused/flash_launch.h"
#include "stages/device_info.h"

namespace fc {
namespace wgmma_detail {
#define FC_WGMMA_INSTANCE(d)                                                                       \
  void launch_d##d##_half(const FlashParams&, const WgmmaMaps&, WgmmaVariant, cudaStream_t);      \
  void launch_d##d##_bf16(const FlashParams&, const WgmmaMaps&, WgmmaVariant, cudaStream_t);
FC_WGMMA_INSTANCE(64)
FC_WGMMA_INSTANCE(128)
#undef FC_WGMMA_INSTANCE
}  // namespace wgmma_detail

namespace {

// cuTensorMapEncodeTiled from the driver the runtime loaded (no link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FC_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !fn) throw Error("wgmma-fused: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A map over a dense 3-D tensor of 2-byte elements, dims innermost first (the head dim, then
// two of rows and heads), boxes of `box` elements a dim, swizzled 128 bytes as wgmma reads
// them; a box's elements past the tensor read as zeros.
CUtensorMap tile_map(const void* base, DType dtype, const std::array<std::int64_t, 3>& dims,
                     const std::array<int, 3>& box) {
  CUtensorMap map{};
  const cuuint64_t extent[3] = {static_cast<cuuint64_t>(dims[0]), static_cast<cuuint64_t>(dims[1]),
                                static_cast<cuuint64_t>(dims[2])};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(dims[0] * 2), static_cast<cuuint64_t>(dims[0] * dims[1] * 2)};
  const cuuint32_t box_size[3] = {static_cast<cuuint32_t>(box[0]), static_cast<cuuint32_t>(box[1]),
                                  static_cast<cuuint32_t>(box[2])};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult status = encode_tiled()(
      &map, dtype == DType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
      const_cast<void*>(base), extent, strides, box_size, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw Error("wgmma-fused: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(status)) +
                ") for a [" + std::to_string(dims[2]) + "][" + std::to_string(dims[1]) + "][" +
                std::to_string(dims[0]) + "] tensor");
  }
  return map;
}

bool built_for_sm90a() {
#ifdef FC_HAVE_SM90A
  return true;
#else
  return false;
#endif
}

}  // namespace

std::optional<std::string> wgmma_unsupported(const Problem& p) {
  if (!built_for_sm90a()) {
    return std::string("wgmma-fused is built for sm_90a only (FLASHCORE_CUDA_ARCHS lacks 90a): wmma-fused runs the "
                       "same algorithm with mma.sync");
  }
  static const DeviceInfo device = device_info();
  if (device.available && !(device.sm_major == 9 && device.sm_minor == 0)) {
    return "wgmma-fused needs an sm_90a device (this one is sm_" + std::to_string(device.sm_major) +
           std::to_string(device.sm_minor) + "): wmma-fused runs the same algorithm with mma.sync";
  }
  const std::int64_t d = p.shape.head_dim;
  if (d != 64 && d != 128) return "head dim " + std::to_string(d) + " not built (64, 128); wmma-fused has 32 to 256";
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) return std::string("inputs must be fp16 or bf16");
  if (p.layout.paged()) {
    return std::string("wgmma-fused reads padded or packed (varlen) inputs through TMA; the paged KV cache is "
                       "wmma-fused's");
  }
  return flash_unsupported(p);
}

void launch_wgmma_forward(const FlashParams& p, int head_dim, DType dtype, WgmmaVariant v, PackedRows packed,
                          cudaStream_t stream) {
  using namespace wgmma_detail;
  WgmmaMaps maps;
  const std::int64_t d = head_dim;
  if (p.q_offsets) {  // packed [rows][H][D]: boxes of one head's rows
    maps.q = tile_map(p.q, dtype, {d, p.heads, packed.q}, {64, 1, kFlashRows});
    maps.k = tile_map(p.k, dtype, {d, p.kv_heads, packed.kv}, {64, 1, kFlashKeys});
    maps.v = tile_map(p.v, dtype, {d, p.kv_heads, packed.kv}, {64, 1, kFlashKeys});
  } else {  // padded [B*H][S][D]
    maps.q = tile_map(p.q, dtype, {d, p.q_len, std::int64_t{p.batch} * p.heads}, {64, kFlashRows, 1});
    maps.k = tile_map(p.k, dtype, {d, p.kv_len, std::int64_t{p.batch} * p.kv_heads}, {64, kFlashKeys, 1});
    maps.v = tile_map(p.v, dtype, {d, p.kv_len, std::int64_t{p.batch} * p.kv_heads}, {64, kFlashKeys, 1});
  }
  const bool half = dtype == DType::f16;
  switch (head_dim) {
    case 64: return half ? launch_d64_half(p, maps, v, stream) : launch_d64_bf16(p, maps, v, stream);
    case 128: return half ? launch_d128_half(p, maps, v, stream) : launch_d128_bf16(p, maps, v, stream);
    default: break;
  }
  throw Error("wgmma-fused: head dim " + std::to_string(head_dim) + " not built (64, 128)");
}

}  // namespace fc

#include "kernels/wgmma_fused/wgmma_launch.h"

#include <cudaTypedefs.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "kernels/wmma_fused/flash_launch.h"
#include "kernels/wmma_fused/flash_outputs.h"
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

// A map over a dense tensor of 2-byte elements, dims innermost first (the head dim, then rows,
// heads and blocks as the layout has them), boxes of `box` elements a dim, swizzled 128 bytes
// as wgmma reads them; a box's elements past the tensor read as zeros.
CUtensorMap tile_map(const void* base, DType dtype, const std::vector<std::int64_t>& dims, const std::vector<int>& box) {
  const std::size_t rank = dims.size();
  std::vector<cuuint64_t> extent(rank), strides(rank - 1);
  std::vector<cuuint32_t> box_size(rank), element_strides(rank, 1);
  cuuint64_t stride = 2;
  for (std::size_t i = 0; i < rank; ++i) {
    extent[i] = static_cast<cuuint64_t>(dims[i]);
    box_size[i] = static_cast<cuuint32_t>(box[i]);
    if (i > 0) strides[i - 1] = stride;
    stride *= extent[i];
  }
  CUtensorMap map{};
  const CUresult status = encode_tiled()(
      &map, dtype == DType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      static_cast<cuuint32_t>(rank), const_cast<void*>(base), extent.data(), strides.data(), box_size.data(),
      element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    std::string shape;
    for (std::size_t i = rank; i-- > 0;) shape += "[" + std::to_string(dims[i]) + "]";
    throw Error("wgmma-fused: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(status)) +
                ") for a " + shape + " tensor");
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
  if (const auto why = paged_blocks_unsupported(p, 8,
                                                 "wgmma-fused's TMA boxes need whole 128-byte swizzle groups; "
                                                 "wmma-fused takes any power of two")) {
    return why;
  }
  return flash_unsupported(p);
}

void launch_wgmma_forward(const FlashParams& p, int head_dim, DType dtype, WgmmaVariant v, InputExtents extents,
                          cudaStream_t stream) {
  using namespace wgmma_detail;
  WgmmaMaps maps;
  const std::int64_t d = head_dim, bh = std::int64_t{p.batch} * p.heads, bh_kv = std::int64_t{p.batch} * p.kv_heads;
  const int block_rows = wgmma_rows(head_dim);
  if (p.q_offsets) {  // packed [rows][H][D]: boxes of one head's rows
    maps.q = tile_map(p.q, dtype, {d, p.heads, extents.q_rows}, {64, 1, block_rows});
  } else {  // padded [B*H][S][D]
    maps.q = tile_map(p.q, dtype, {d, p.q_len, bh}, {64, block_rows, 1});
  }
  if (p.block_table) {  // the paged cache [blocks][block size][Hkv][D]: boxes of one block's keys
    const std::int64_t block_keys = std::int64_t{1} << p.block_size_log2;
    const int rows = static_cast<int>(std::min<std::int64_t>(block_keys, kWgmmaKeys));
    maps.k = tile_map(p.k, dtype, {d, p.kv_heads, block_keys, extents.cache_blocks}, {64, 1, rows, 1});
    maps.v = tile_map(p.v, dtype, {d, p.kv_heads, block_keys, extents.cache_blocks}, {64, 1, rows, 1});
  } else if (p.q_offsets) {
    maps.k = tile_map(p.k, dtype, {d, p.kv_heads, extents.kv_rows}, {64, 1, kWgmmaKeys});
    maps.v = tile_map(p.v, dtype, {d, p.kv_heads, extents.kv_rows}, {64, 1, kWgmmaKeys});
  } else {
    maps.k = tile_map(p.k, dtype, {d, p.kv_len, bh_kv}, {64, kWgmmaKeys, 1});
    maps.v = tile_map(p.v, dtype, {d, p.kv_len, bh_kv}, {64, kWgmmaKeys, 1});
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

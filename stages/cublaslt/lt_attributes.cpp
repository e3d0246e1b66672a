#include "stages/cublaslt/lt_attributes.h"

namespace fc {

AttributeInfo attribute_info(cublasLtMatrixLayoutAttribute_t attr) {
  using T = AttributeType;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return {"TYPE", T::uint32};
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return {"ORDER", T::int32};
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return {"ROWS", T::uint64};
    case CUBLASLT_MATRIX_LAYOUT_COLS: return {"COLS", T::uint64};
    case CUBLASLT_MATRIX_LAYOUT_LD: return {"LD", T::int64};
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return {"BATCH_COUNT", T::int32};
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return {"STRIDED_BATCH_OFFSET", T::int64};
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return {"PLANE_OFFSET", T::int64};
    default: break;  // BATCH_MODE (newer toolkits only): never set here
  }
  return {"unknown layout attribute", T::unknown};
}

AttributeInfo attribute_info(cublasLtMatmulDescAttributes_t attr) {
  using T = AttributeType;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return {"COMPUTE_TYPE", T::int32};
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return {"SCALE_TYPE", T::int32};
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return {"POINTER_MODE", T::int32};
    case CUBLASLT_MATMUL_DESC_TRANSA: return {"TRANSA", T::int32};
    case CUBLASLT_MATMUL_DESC_TRANSB: return {"TRANSB", T::int32};
    case CUBLASLT_MATMUL_DESC_TRANSC: return {"TRANSC", T::int32};
    case CUBLASLT_MATMUL_DESC_FILL_MODE: return {"FILL_MODE", T::int32};
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return {"EPILOGUE", T::uint32};
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return {"BIAS_POINTER", T::pointer};
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return {"BIAS_BATCH_STRIDE", T::int64};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return {"EPILOGUE_AUX_POINTER", T::pointer};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return {"EPILOGUE_AUX_LD", T::int64};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return {"EPILOGUE_AUX_BATCH_STRIDE", T::int64};
    case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE: return {"ALPHA_VECTOR_BATCH_STRIDE", T::int64};
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return {"SM_COUNT_TARGET", T::int32};
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return {"A_SCALE_POINTER", T::pointer};
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return {"B_SCALE_POINTER", T::pointer};
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return {"C_SCALE_POINTER", T::pointer};
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return {"D_SCALE_POINTER", T::pointer};
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return {"AMAX_D_POINTER", T::pointer};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return {"EPILOGUE_AUX_DATA_TYPE", T::int32};
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return {"FAST_ACCUM", T::int8};
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return {"BIAS_DATA_TYPE", T::int32};
    default: break;  // scale modes, emulation: attributes of newer toolkits we never set
  }
  return {"unknown matmul desc attribute", T::unknown};
}

AttributeInfo attribute_info(cublasLtMatmulPreferenceAttributes_t attr) {
  using T = AttributeType;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return {"SEARCH_MODE", T::uint32};
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return {"MAX_WORKSPACE_BYTES", T::uint64};
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return {"REDUCTION_SCHEME_MASK", T::uint32};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return {"MIN_ALIGNMENT_A_BYTES", T::uint32};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return {"MIN_ALIGNMENT_B_BYTES", T::uint32};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return {"MIN_ALIGNMENT_C_BYTES", T::uint32};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return {"MIN_ALIGNMENT_D_BYTES", T::uint32};
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return {"MAX_WAVES_COUNT", T::float32};
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: return {"IMPL_MASK", T::uint64};
    default: break;
  }
  return {"unknown preference attribute", T::unknown};
}

AttributeInfo attribute_info(cublasLtMatmulAlgoConfigAttributes_t attr) {
  using T = AttributeType;
  switch (attr) {
    case CUBLASLT_ALGO_CONFIG_ID: return {"ID", T::int32};
    case CUBLASLT_ALGO_CONFIG_TILE_ID: return {"TILE_ID", T::uint32};
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: return {"SPLITK_NUM", T::int32};
    case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME: return {"REDUCTION_SCHEME", T::uint32};
    case CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING: return {"CTA_SWIZZLING", T::uint32};
    case CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION: return {"CUSTOM_OPTION", T::uint32};
    case CUBLASLT_ALGO_CONFIG_STAGES_ID: return {"STAGES_ID", T::uint32};
    case CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID: return {"INNER_SHAPE_ID", T::uint16};
    case CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID: return {"CLUSTER_SHAPE_ID", T::uint16};
    default: break;
  }
  return {"unknown algo config attribute", T::unknown};
}

std::size_t attribute_type_size(AttributeType t) {
  switch (t) {
    case AttributeType::int8: return 1;
    case AttributeType::uint16: return 2;
    case AttributeType::int32: case AttributeType::uint32: case AttributeType::float32: return 4;
    case AttributeType::int64: case AttributeType::uint64: return 8;
    case AttributeType::pointer: return sizeof(void*);
    case AttributeType::unknown: return 0;
  }
  return 0;
}

const char* attribute_type_name(AttributeType t) {
  switch (t) {
    case AttributeType::int8: return "int8";
    case AttributeType::int32: return "int32";
    case AttributeType::uint16: return "uint16";
    case AttributeType::uint32: return "uint32";
    case AttributeType::int64: return "int64";
    case AttributeType::uint64: return "uint64";
    case AttributeType::float32: return "float";
    case AttributeType::pointer: return "pointer";
    case AttributeType::unknown: return "unknown";
  }
  return "unknown";
}

bool attribute_type_is_signed(AttributeType t) {
  return t == AttributeType::int8 || t == AttributeType::int32 || t == AttributeType::int64;
}

}  // namespace fc

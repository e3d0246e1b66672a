#include "stages/cublaslt/lt_types.h"

namespace fc {

std::optional<cudaDataType_t> cuda_data_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::i32: return CUDA_R_32I;
    case DType::i64: return CUDA_R_64I;
    case DType::u8: return CUDA_R_8U;
    case DType::u16: return CUDA_R_16U;
    case DType::boolean: return std::nullopt;
  }
  return std::nullopt;
}

std::vector<cudaDataType_t> documented_scale_types(cublasComputeType_t compute) {
  switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
      return {CUDA_R_16F};
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
      return {CUDA_R_32I, CUDA_R_32F};
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
#if CUBLAS_VERSION >= 120900
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
#endif
      return {CUDA_R_32F, CUDA_C_32F};
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
#if CUBLAS_VERSION >= 130100
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
#endif
      return {CUDA_R_64F, CUDA_C_64F};
    default:
      break;
  }
  return {};
}

}  // namespace fc

#include "stages/cublaslt/lt_names.h"

#include <cuda_runtime_api.h>  // CUDART_VERSION

namespace fc {
namespace {
std::string unknown(int value) { return "unknown (" + std::to_string(value) + ")"; }
}  // namespace

std::string data_type_name(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_C_16F: return "CUDA_C_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_C_16BF: return "CUDA_C_16BF";
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_C_32F: return "CUDA_C_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_C_64F: return "CUDA_C_64F";
    case CUDA_R_4I: return "CUDA_R_4I";
    case CUDA_C_4I: return "CUDA_C_4I";
    case CUDA_R_4U: return "CUDA_R_4U";
    case CUDA_C_4U: return "CUDA_C_4U";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_C_8I: return "CUDA_C_8I";
    case CUDA_R_8U: return "CUDA_R_8U";
    case CUDA_C_8U: return "CUDA_C_8U";
    case CUDA_R_16I: return "CUDA_R_16I";
    case CUDA_C_16I: return "CUDA_C_16I";
    case CUDA_R_16U: return "CUDA_R_16U";
    case CUDA_C_16U: return "CUDA_C_16U";
    case CUDA_R_32I: return "CUDA_R_32I";
    case CUDA_C_32I: return "CUDA_C_32I";
    case CUDA_R_32U: return "CUDA_R_32U";
    case CUDA_C_32U: return "CUDA_C_32U";
    case CUDA_R_64I: return "CUDA_R_64I";
    case CUDA_C_64I: return "CUDA_C_64I";
    case CUDA_R_64U: return "CUDA_R_64U";
    case CUDA_C_64U: return "CUDA_C_64U";
    case CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
    case CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
#if CUDART_VERSION >= 12080
    case CUDA_R_8F_UE8M0: return "CUDA_R_8F_UE8M0";
    case CUDA_R_6F_E2M3: return "CUDA_R_6F_E2M3";
    case CUDA_R_6F_E3M2: return "CUDA_R_6F_E3M2";
    case CUDA_R_4F_E2M1: return "CUDA_R_4F_E2M1";
#endif
    default: break;
  }
  return unknown(t);
}

std::string compute_type_name(cublasComputeType_t t) {
  switch (t) {
    case CUBLAS_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
    case CUBLAS_COMPUTE_16F_PEDANTIC: return "CUBLAS_COMPUTE_16F_PEDANTIC";
    case CUBLAS_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_PEDANTIC: return "CUBLAS_COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "CUBLAS_COMPUTE_32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
    case CUBLAS_COMPUTE_64F_PEDANTIC: return "CUBLAS_COMPUTE_64F_PEDANTIC";
    case CUBLAS_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
    case CUBLAS_COMPUTE_32I_PEDANTIC: return "CUBLAS_COMPUTE_32I_PEDANTIC";
#if CUBLAS_VERSION >= 120900
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9: return "CUBLAS_COMPUTE_32F_EMULATED_16BFX9";
#endif
#if CUBLAS_VERSION >= 130100
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: return "CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT";
#endif
    default: break;
  }
  return unknown(t);
}

std::string order_name(cublasLtOrder_t order) {
  switch (order) {
    case CUBLASLT_ORDER_COL: return "COL";
    case CUBLASLT_ORDER_ROW: return "ROW";
    case CUBLASLT_ORDER_COL32: return "COL32";
    case CUBLASLT_ORDER_COL4_4R2_8C: return "COL4_4R2_8C";
    case CUBLASLT_ORDER_COL32_2R_4R4: return "COL32_2R_4R4";
    default: break;
  }
  return unknown(order);
}

std::string operation_name(cublasOperation_t op) {
  switch (op) {
    case CUBLAS_OP_N: return "N";
    case CUBLAS_OP_T: return "T";
    case CUBLAS_OP_C: return "C";
    case CUBLAS_OP_CONJG: return "CONJG";
  }
  return unknown(op);
}

std::string epilogue_name(cublasLtEpilogue_t epilogue) {
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_RELU_AUX: return "RELU_AUX";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS: return "RELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DRELU: return "DRELU";
    case CUBLASLT_EPILOGUE_DRELU_BGRAD: return "DRELU_BGRAD";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: break;
  }
  return unknown(epilogue);
}

std::string pointer_mode_name(cublasLtPointerMode_t mode) {
  switch (mode) {
    case CUBLASLT_POINTER_MODE_HOST: return "HOST";
    case CUBLASLT_POINTER_MODE_DEVICE: return "DEVICE";
    case CUBLASLT_POINTER_MODE_DEVICE_VECTOR: return "DEVICE_VECTOR";
    case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO: return "ALPHA_DEVICE_VECTOR_BETA_ZERO";
    case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST: return "ALPHA_DEVICE_VECTOR_BETA_HOST";
    default: break;
  }
  return unknown(mode);
}

std::string reduction_scheme_name(cublasLtReductionScheme_t scheme) {
  switch (scheme) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "NONE";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "INPLACE";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "COMPUTE_TYPE";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "OUTPUT_TYPE";
    default: break;
  }
  return unknown(scheme);
}

std::string status_name(cublasStatus_t status) {
  const char* name = cublasLtGetStatusName(status);
  return name ? name : unknown(status);
}

}  // namespace fc

#pragma once
// Names of cuBLASLt enum values as a reader of cublasLt.h would look them up: data and compute
// types keep their full enumerator ("CUDA_R_16F", "CUBLAS_COMPUTE_32F"); the others drop their
// prefix ("COL", "T", "RELU_BIAS", "INPLACE"). A value we do not know reads "unknown (N)".
#include <cublasLt.h>

#include <string>

namespace fc {

std::string data_type_name(cudaDataType_t t);
std::string compute_type_name(cublasComputeType_t t);
std::string order_name(cublasLtOrder_t order);
std::string operation_name(cublasOperation_t op);
std::string epilogue_name(cublasLtEpilogue_t epilogue);
std::string pointer_mode_name(cublasLtPointerMode_t mode);
std::string reduction_scheme_name(cublasLtReductionScheme_t scheme);
std::string status_name(cublasStatus_t status);  // "CUBLAS_STATUS_INVALID_VALUE"

}  // namespace fc

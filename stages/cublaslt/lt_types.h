#pragma once
// Type facts the lint needs: which cudaDataType holds an fc::DType, and which scale types
// (the type of alpha and beta) cuBLASLt documents for each compute type.
#include <cublasLt.h>

#include <optional>
#include <vector>

#include "core/dtype.h"

namespace fc {

// nullopt for a dtype cuBLASLt has no matrix type for (bool).
std::optional<cudaDataType_t> cuda_data_type(DType t);

// The scale types cublasLtMatmul accepts with `compute`, from the "datatypes supported" tables
// of cublasLtMatmul() in the cuBLAS documentation (docs.nvidia.com/cuda/cublas, section
// cublasLtMatmul). Empty for a compute type the table does not list.
//
//   compute type                                  scale type
//   CUBLAS_COMPUTE_16F, _16F_PEDANTIC             CUDA_R_16F
//   CUBLAS_COMPUTE_32I, _32I_PEDANTIC             CUDA_R_32I (C int32) or CUDA_R_32F (C int8)
//   CUBLAS_COMPUTE_32F, _32F_PEDANTIC             CUDA_R_32F, or CUDA_C_32F for complex data
//   CUBLAS_COMPUTE_32F_FAST_16F/_16BF/_TF32       CUDA_R_32F, or CUDA_C_32F for complex data
//   CUBLAS_COMPUTE_32F_EMULATED_16BFX9            CUDA_R_32F, or CUDA_C_32F for complex data
//   CUBLAS_COMPUTE_64F, _64F_PEDANTIC             CUDA_R_64F, or CUDA_C_64F for complex data
//   CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT        CUDA_R_64F, or CUDA_C_64F for complex data
//
// FP8 and block-scaled inputs also run with CUBLAS_COMPUTE_32F and a CUDA_R_32F scale. Note
// CUBLAS_COMPUTE_16F with a CUDA_R_32F scale is not in the table: it is the classic mistake of
// "fp16 compute, fp32 alpha": cuBLASLt's Set accepts it (Sets check sizes only) and the
// failure comes later, when the matmul is planned or launched.
std::vector<cudaDataType_t> documented_scale_types(cublasComputeType_t compute);

}  // namespace fc

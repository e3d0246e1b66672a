#pragma once
// Status checks for the three C libraries we call: CUDA runtime, cuBLASLt, HDF5.
// Every call is wrapped; a failure throws fc::Error naming the call, the status and the
// source location, so nothing fails silently and no caller has to remember to look.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <hdf5.h>

#include "core/error.h"

namespace fc::detail {
[[noreturn]] void fail_cuda(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void fail_hdf5(const char* call, const char* file, int line);
}  // namespace fc::detail

#define FC_CUDA(call)                                                              \
  do {                                                                             \
    cudaError_t fc_status_ = (call);                                               \
    if (fc_status_ != cudaSuccess) ::fc::detail::fail_cuda(fc_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define FC_CUBLAS(call)                                                            \
  do {                                                                             \
    cublasStatus_t fc_status_ = (call);                                            \
    if (fc_status_ != CUBLAS_STATUS_SUCCESS)                                       \
      ::fc::detail::fail_cublas(fc_status_, #call, __FILE__, __LINE__);            \
  } while (0)

// HDF5 signals failure by a negative herr_t/hid_t/htri_t; the value is returned on success.
#define FC_H5(call)                                                                \
  ([&]() {                                                                         \
    auto fc_value_ = (call);                                                       \
    if (fc_value_ < 0) ::fc::detail::fail_hdf5(#call, __FILE__, __LINE__);          \
    return fc_value_;                                                              \
  }())

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define FC_CUDA_LAUNCH() FC_CUDA(cudaGetLastError())

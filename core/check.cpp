#include "core/check.h"

#include <string>

namespace fc::detail {
namespace {
std::string where(const char* call, const char* file, int line) {
  return std::string(call) + " at " + file + ":" + std::to_string(line);
}
}  // namespace

void fail_cuda(cudaError_t status, const char* call, const char* file, int line) {
  throw Error(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ") in " + where(call, file, line));
}

void fail_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error("cuBLASLt status " + std::to_string(static_cast<int>(status)) + " (" +
              cublasLtGetStatusName(status) + ") in " + where(call, file, line));
}

void fail_hdf5(const char* call, const char* file, int line) {
  throw Error("HDF5 call failed: " + where(call, file, line));
}

}  // namespace fc::detail

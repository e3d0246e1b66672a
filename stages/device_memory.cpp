#include "stages/device_memory.h"

#include <string>

namespace fc {

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why) *why = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device";
    cudaGetLastError();  // clear the sticky status of the failed query
    return false;
  }
  return true;
}

}  // namespace fc

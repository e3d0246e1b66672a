#include "stages/device_info.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "stages/device_memory.h"

namespace fc {
namespace {
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
}  // namespace

std::string DeviceInfo::describe() const {
  if (!available) return "none (" + why_unavailable + ")";
  return name + " (sm_" + std::to_string(sm_major) + std::to_string(sm_minor) + ", " + std::to_string(multiprocessors) +
         " SMs)";
}

DeviceInfo device_info() {
  DeviceInfo info;
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) info.runtime = cuda_version(runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) info.driver = cuda_version(driver);
  const std::size_t lt = cublasLtGetVersion();
  info.cublaslt = std::to_string(lt / 10000) + "." + std::to_string((lt / 100) % 100) + "." + std::to_string(lt % 100);
  info.available = cuda_device_available(&info.why_unavailable);
  if (!info.available) return info;
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    info.name = prop.name;
    info.sm_major = prop.major;
    info.sm_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
  }
  return info;
}

}  // namespace fc

#pragma once
// What the machine is, for reports and snapshot metadata.
#include <string>

namespace fc {

struct DeviceInfo {
  bool available = false;
  std::string name = "none";  // "NVIDIA H100 80GB HBM3"
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  std::string driver, runtime, cublaslt;  // "13.0", "13.0", "13.0.0.19"
  std::string why_unavailable;
  std::string describe() const;  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" or "none (no CUDA device)"
};

DeviceInfo device_info();

}  // namespace fc

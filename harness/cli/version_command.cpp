// flashcore-check version: what this binary is and what it runs on.
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/version.h"
#include "stages/device_info.h"

namespace fc {

int run_version() {
  const DeviceInfo d = device_info();
  std::cout << "flashcore-check " << tool_version() << " (git " << git_revision() << ", CUDA archs "
            << cuda_architectures() << ")\n"
            << "device: " << d.describe() << "\n"
            << "CUDA runtime " << d.runtime << ", driver " << (d.driver.empty() ? "none" : d.driver) << ", cuBLASLt "
            << d.cublaslt << "\n";
  return kExitPass;
}

}  // namespace fc

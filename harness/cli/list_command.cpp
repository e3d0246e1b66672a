// flashcore-check list: the implementations built into this binary.
#include <iomanip>
#include <iostream>

#include "harness/cli/commands.h"
#include "kernels/implementation.h"

namespace fc {

int run_list() {
  std::cout << "implementations:\n";
  for (const auto& impl : make_implementations()) {
    std::cout << "  " << std::left << std::setw(22) << impl->name() << (impl->on_gpu() ? "[gpu] " : "[cpu] ")
              << impl->summary() << "\n";
  }
  return kExitPass;
}

}  // namespace fc

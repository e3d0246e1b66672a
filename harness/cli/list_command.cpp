// flashcore-check list: the implementations built into this binary and loaded from plugins, and the faults.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/faults/catalog.h"
#include "kernels/implementation.h"

namespace fc {

int run_list() {
  const std::vector<std::unique_ptr<Implementation>> impls = make_implementations();
  std::size_t width = 22;  // plugins may bring longer names
  for (const auto& impl : impls) width = std::max(width, impl->name().size() + 2);
  for (const FaultSpec& f : fault_catalog()) width = std::max(width, f.id.size() + 2);
  const int w = static_cast<int>(width);
  std::cout << "implementations:\n";
  for (const auto& impl : impls) {
    std::cout << "  " << std::left << std::setw(w) << impl->name() << (impl->on_gpu() ? "[gpu] " : "[cpu] ")
              << impl->summary() << "\n";
  }
  std::cout << "\nfaults (--inject FAULT; `faults` runs them all):\n";
  for (const FaultSpec& f : fault_catalog()) {
    std::string where;
    for (const std::string& impl : f.impls) where += (where.empty() ? "" : ", ") + impl;
    std::cout << "  " << std::left << std::setw(w) << f.id << f.bug << "\n"
              << "  " << std::setw(w) << "" << "in " << where << "; found at " << f.expected_stage << ", cause "
              << f.expected_cause << "\n";
  }
  return kExitPass;
}

}  // namespace fc

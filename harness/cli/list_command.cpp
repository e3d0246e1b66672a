// flashcore-check list: the implementations built into this binary.
#include <iomanip>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/faults/catalog.h"
#include "kernels/implementation.h"

namespace fc {

int run_list() {
  std::cout << "implementations:\n";
  for (const auto& impl : make_implementations()) {
    std::cout << "  " << std::left << std::setw(22) << impl->name() << (impl->on_gpu() ? "[gpu] " : "[cpu] ")
              << impl->summary() << "\n";
  }
  std::cout << "\nfaults (--inject FAULT; `faults` runs them all):\n";
  for (const FaultSpec& f : fault_catalog()) {
    std::string where;
    for (const std::string& impl : f.impls) where += (where.empty() ? "" : ", ") + impl;
    std::cout << "  " << std::left << std::setw(22) << f.id << f.bug << "\n"
              << "  " << std::setw(22) << "" << "in " << where << "; found at " << f.expected_stage << ", cause "
              << f.expected_cause << "\n";
  }
  return kExitPass;
}

}  // namespace fc

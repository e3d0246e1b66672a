#include "kernels/cpu_emulated/cpu_implementations.h"
#include "kernels/implementation.h"
#include "kernels/naive/naive.h"

namespace fc {

std::vector<std::unique_ptr<Implementation>> make_implementations() {
  std::vector<std::unique_ptr<Implementation>> all;
  all.push_back(make_naive());
  all.push_back(make_cpu_full());
  all.push_back(make_cpu_paged());
  return all;
}

std::unique_ptr<Implementation> make_implementation(const std::string& name) {
  for (auto& impl : make_implementations()) {
    if (impl->name() == name) return std::move(impl);
  }
  return nullptr;
}

}  // namespace fc

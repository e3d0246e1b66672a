#include "kernels/cpu_emulated/cpu_implementations.h"
#include "kernels/implementation.h"
#include "kernels/fa1_scalar/fa1_scalar.h"
#include "kernels/flash_splitkv/flash_splitkv.h"
#include "kernels/naive/naive.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {

std::vector<std::unique_ptr<Implementation>> make_implementations() {
  std::vector<std::unique_ptr<Implementation>> all;
  all.push_back(make_naive());
  all.push_back(make_fa1_scalar());
  all.push_back(make_flash_splitkv());
  all.push_back(make_wmma_fused());
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

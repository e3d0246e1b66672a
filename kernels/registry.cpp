#include <algorithm>

#include "core/error.h"
#include "kernels/cpu_emulated/cpu_implementations.h"
#include "kernels/cublaslt_paged/cublaslt_paged.h"
#include "kernels/cublaslt_splitk/cublaslt_splitk.h"
#include "kernels/implementation.h"
#include "kernels/fa1_scalar/fa1_scalar.h"
#include "kernels/flash_splitkv/flash_splitkv.h"
#include "kernels/naive/naive.h"
#include "kernels/wgmma_fused/wgmma_fused.h"
#include "kernels/wmma_fused/wmma_fused.h"

namespace fc {

void Implementation::inject(const std::string& fault) {
  if (!fault.empty()) {
    const std::vector<std::string> known = faults();
    if (std::find(known.begin(), known.end(), fault) == known.end()) {
      throw Error("--inject " + fault + ": not a fault of " + name());
    }
  }
  fault_ = fault;
}

namespace {
std::vector<ImplementationSource>& sources() {
  static std::vector<ImplementationSource> added;
  return added;
}
}  // namespace

void add_implementation_source(ImplementationSource source) { sources().push_back(std::move(source)); }

std::vector<std::unique_ptr<Implementation>> make_implementations() {
  std::vector<std::unique_ptr<Implementation>> all;
  all.push_back(make_naive());
  all.push_back(make_cublaslt_paged());
  all.push_back(make_cublaslt_splitk());
  all.push_back(make_fa1_scalar());
  all.push_back(make_flash_splitkv());
  all.push_back(make_wmma_fused());
  all.push_back(make_wgmma_fused());
  all.push_back(make_cpu_full());
  all.push_back(make_cpu_paged());
  for (const ImplementationSource& source : sources()) {
    for (auto& impl : source()) all.push_back(std::move(impl));
  }
  return all;
}

std::unique_ptr<Implementation> make_implementation(const std::string& name) {
  for (auto& impl : make_implementations()) {
    if (impl->name() == name) return std::move(impl);
  }
  return nullptr;
}

std::vector<std::unique_ptr<Implementation>> select_implementations(const std::vector<std::string>& names) {
  if (names.empty()) return make_implementations();
  std::vector<std::unique_ptr<Implementation>> chosen;
  for (const std::string& name : names) {
    std::unique_ptr<Implementation> impl = make_implementation(name);
    if (!impl) {
      std::string known;
      for (const auto& i : make_implementations()) known += (known.empty() ? "" : ", ") + i->name();
      throw Error("--impl '" + name + "': unknown implementation (built: " + known + ")");
    }
    chosen.push_back(std::move(impl));
  }
  return chosen;
}

namespace {

bool has_fault(const Implementation& impl, const std::string& fault) {
  const std::vector<std::string> faults = impl.faults();
  return std::find(faults.begin(), faults.end(), fault) != faults.end();
}

}  // namespace

std::vector<std::unique_ptr<Implementation>> with_fault(std::vector<std::unique_ptr<Implementation>> impls,
                                                        const std::string& fault) {
  std::vector<std::unique_ptr<Implementation>> faulty;
  std::string selected;
  for (auto& impl : impls) {
    selected += (selected.empty() ? "" : ", ") + impl->name();
    if (!has_fault(*impl, fault)) continue;
    impl->inject(fault);
    faulty.push_back(std::move(impl));
  }
  if (!faulty.empty()) return faulty;
  std::string holders;
  for (const auto& impl : make_implementations()) {
    if (has_fault(*impl, fault)) holders += (holders.empty() ? "" : ", ") + impl->name();
  }
  if (holders.empty()) throw Error("--inject '" + fault + "': unknown fault (`list` shows them)");
  throw Error("--inject " + fault + ": planted only in " + holders + ", none of which is selected (" + selected + ")");
}

}  // namespace fc

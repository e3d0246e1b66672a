// The fault catalog against the implementations that carry the faults, and the detection
// matrix on the CPU implementations (the GPU ones are in tests/gpu/test_faults_gpu.cpp).
#include <algorithm>
#include <set>

#include "catch.h"
#include "harness/faults/matrix.h"
#include "kernels/implementation.h"
#include "support/matrix_checks.h"

namespace fc {

TEST_CASE("every implementation's faults are in the catalog and the catalog names them back", "[faults]") {
  std::set<std::pair<std::string, std::string>> from_impls, from_catalog;
  for (const auto& impl : make_implementations()) {
    for (const std::string& f : impl->faults()) from_impls.insert({f, impl->name()});
  }
  for (const FaultSpec& f : fault_catalog()) {
    for (const std::string& impl : f.impls) from_catalog.insert({f.id, impl});
  }
  CHECK(from_impls == from_catalog);
  CHECK(fault_catalog().size() >= 12);
}

TEST_CASE("an unknown fault is refused by an implementation", "[faults]") {
  std::unique_ptr<Implementation> impl = make_implementation("cpu-emulated");
  CHECK_THROWS_AS(impl->inject("first-page-rescale"), Error);
  impl->inject("masked-row-nan");
  CHECK(impl->injected() == "masked-row-nan");
  impl->inject("");
  CHECK(impl->injected().empty());
}

TEST_CASE("the CPU fault matrix finds every fault at its stage, element and cause, without false alarms",
          "[faults]") {
  CHECK(test::check_fault_matrix(false) >= 7);
}

TEST_CASE("a sweep of clean random cases through the CPU implementations raises no alarm", "[faults]") {
  test::check_clean_sweep(60, false);
}

}  // namespace fc

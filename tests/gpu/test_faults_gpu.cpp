// The whole detection matrix on a GPU: every fault x every implementation that has it, and
// a sweep of 500 clean random cases through every implementation.
#include "catch.h"
#include "support/matrix_checks.h"

namespace fc {

TEST_CASE("the full fault matrix is right on stage, element and cause, without false alarms", "[gpu][faults]") {
  CHECK(test::check_fault_matrix(true) >= 20);
}

TEST_CASE("500 clean random cases through every implementation raise no alarm", "[gpu][sweep]") {
  test::check_clean_sweep(500, true);
}

TEST_CASE("100 clean long-context cases (4096 to 16384 keys) through every implementation raise no alarm",
          "[gpu][sweep]") {
  test::check_clean_sweep(100, true, true);
}

}  // namespace fc

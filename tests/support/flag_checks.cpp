#include "support/flag_checks.h"

#include "catch.h"

namespace fc::test {

void require_same_flags(const FlagCounts& a, const FlagCounts& b) {
  CHECK(a.nan == b.nan);
  CHECK(a.pos_inf == b.pos_inf);
  CHECK(a.neg_inf == b.neg_inf);
  CHECK(a.subnormal == b.subnormal);
  CHECK(a.unwritten == b.unwritten);
  CHECK(a.foreign_poison == b.foreign_poison);
  CHECK(a.first_nan == b.first_nan);
  CHECK(a.first_inf == b.first_inf);
  CHECK(a.first_unwritten == b.first_unwritten);
  CHECK(a.first_foreign == b.first_foreign);
  CHECK(a.max_abs_bits == b.max_abs_bits);
}

}  // namespace fc::test

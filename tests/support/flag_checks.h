#pragma once
// Two flag results that must agree field by field: counts, first indices, largest |x|.
#include "stages/flags.h"

namespace fc::test {

void require_same_flags(const FlagCounts& a, const FlagCounts& b);

}  // namespace fc::test

#pragma once
// The sensitivity table (terminal) and its JSON.
#include <ostream>
#include <string>
#include <vector>

#include "harness/sensitivity/sensitivity.h"

namespace fc {

// Per implementation and dtype: a row per perturbation and stage kind, a column per key
// length, each cell "caught/trials" (and "i=N" when N of the catches were at an element the
// perturbation did not change); for element-scale the smallest delta caught in every trial.
void write_sensitivity_table(std::ostream& out, const SensitivityResult& result);

void write_sensitivity_json(std::ostream& out, const std::string& command, const SensitivityResult& result);

}  // namespace fc

#pragma once
// The detection matrix as the terminal shows it: a row per cell, each column as wide as its
// longest entry.
#include <ostream>
#include <string>
#include <vector>

#include "harness/faults/matrix.h"

namespace fc {

// "normalize (production) (0,0,0,0) trace-build-mismatch": output, element, cause.
std::string expected_text(const Expectation& e);
std::string found_text(const MatrixCell& c);

// Header and rows: fault, implementation, expected, found, clean (pass/ALARM), result (ok/WRONG).
void write_matrix_table(std::ostream& out, const std::vector<MatrixCell>& cells, bool colour);

}  // namespace fc

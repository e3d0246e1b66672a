#pragma once
// The detection-matrix and clean-sweep checks the CPU and the [gpu] tests share.
#include <cstddef>

namespace fc::test {

// Every cell of the detection matrix over the implementations that run here (the GPU ones
// too when `gpu`): one cell per fault each of them declares, each found at its stage,
// element and cause, its clean run without alarm. Returns the number of cells.
std::size_t check_fault_matrix(bool gpu);

// `cases` clean random cases through every implementation that runs here: every one runs
// each case it does not decline (the CPU ones decline none) and passes; long_context: the
// long-context random cases (harness/random_cases.h).
void check_clean_sweep(int cases, bool gpu, bool long_context = false);

}  // namespace fc::test

#pragma once
// The detection matrix: every fault x every implementation that has it, on the fault's
// trigger case, run clean (must pass: no false alarm) and faulty (must be found at the
// expected stage output, element and cause); and a sweep of clean random cases.
#include <optional>
#include <string>
#include <vector>

#include "harness/faults/catalog.h"
#include "reports/case_result.h"
#include "reports/progress.h"

namespace fc {

struct MatrixCell {
  std::string fault, impl;
  Expectation expected;
  CaseResult clean, faulty;
  bool stage_ok = false, index_ok = false, cause_ok = false;
  bool clean_ok() const { return clean.verdict == Verdict::pass; }
  bool ok() const { return stage_ok && index_ok && cause_ok && clean_ok(); }
};

struct MatrixOptions {
  std::vector<std::string> faults, impls;  // empty: all
  bool gpu = false;                        // GPU implementations can run
  std::string snapshots;                   // a folder: write each faulty run as a fixture
  std::string command_line;
  Progress* progress = nullptr;            // told the cells' count, then each cell done
};

std::vector<MatrixCell> run_fault_matrix(const MatrixOptions& options);

struct SweepResult {
  int cases = 0, runs = 0;
  std::vector<CaseResult> divergences;  // should stay empty
};
// `cases` random clean cases (harness/random_cases.h), each through every selected implementation.
SweepResult run_clean_sweep(int cases, const std::vector<std::string>& impls, bool gpu, Progress* progress = nullptr);

}  // namespace fc

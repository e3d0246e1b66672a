#pragma once
// The detection matrix: every fault x every implementation that has it, on the fault's
// trigger case, run clean (must pass: no false alarm) and faulty (must be found at the
// expected stage output, element and cause); and a sweep of clean random cases.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/faults/catalog.h"
#include "harness/trace/judge.h"
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
  // When set: called with each faulty run (after grading its cell) and each clean run that
  // did not pass, with its run and references kept (the HTML report draws them).
  std::function<void(const MatrixCell& cell, const AttentionInputs& inputs, const Judged& run, bool faulty)> on_run;
  Progress* progress = nullptr;            // told the cells' count, then each cell done
  // The flashcore-check that runs isolated cells (FaultSpec::isolated); empty: this process's
  // own executable (a test binary embedding the library names the tool's).
  std::string executable;
};

std::vector<MatrixCell> run_fault_matrix(const MatrixOptions& options);
// Every stage output of the matrix's cells (its faulty runs' graphs), before any runs.
std::vector<std::string> matrix_output_names(const MatrixOptions& options);

struct SweepResult {
  int cases = 0, runs = 0;
  std::vector<CaseResult> divergences;  // should stay empty
};
// `cases` random clean cases (harness/random_cases.h), each through every selected
// implementation; long_context: random_long_case's thousands of keys; `on_divergence`, when
// set, gets each diverging run with its references; `progress` is told the cases and each one done.
SweepResult run_clean_sweep(int cases, const std::vector<std::string>& impls, bool gpu, bool long_context = false,
                            const std::function<void(const AttentionInputs&, const Judged&)>& on_divergence = {},
                            Progress* progress = nullptr);

}  // namespace fc

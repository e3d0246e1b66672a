#include "support/matrix_checks.h"

#include "catch.h"
#include "harness/faults/matrix.h"
#include "harness/random_cases.h"
#include "kernels/implementation.h"

namespace fc::test {
std::size_t check_fault_matrix(bool gpu) {
  MatrixOptions options;
  options.gpu = gpu;
  options.executable = FC_CLI_PATH;
  const std::vector<MatrixCell> cells = run_fault_matrix(options);
  // The catalog lists the implementations per fault; it must reach every fault each
  // implementation declares.
  std::size_t declared = 0;
  for (const auto& impl : make_implementations()) {
    if (gpu || !impl->on_gpu()) declared += impl->faults().size();
  }
  CHECK(cells.size() == declared);
  for (const MatrixCell& c : cells) {
    INFO(c.fault << " in " << c.impl << ": found "
                 << (c.faulty.divergence ? c.faulty.divergence->output + " " + c.faulty.divergence->cause + " " +
                                               c.faulty.divergence->evidence
                                         : std::string(verdict_name(c.faulty.verdict)) + " " + c.faulty.reason));
    CHECK(c.clean_ok());
    CHECK(c.stage_ok);
    CHECK(c.index_ok);
    CHECK(c.cause_ok);
  }
  return cells.size();
}

void check_clean_sweep(int cases, bool gpu, bool long_context) {
  const SweepResult sweep = run_clean_sweep(cases, {}, gpu, long_context);
  // Every implementation runs every case it does not decline; the CPU ones decline none.
  int runnable = 0;
  for (int i = 1; i <= cases; ++i) {
    const std::uint64_t seed = static_cast<std::uint64_t>(10000 + i);  // the sweep's cases (faults/matrix.cpp)
    const Problem problem = make_problem((long_context ? random_long_case(seed) : random_case(seed)).spec);
    for (const auto& impl : make_implementations()) {
      if (!gpu && impl->on_gpu()) continue;
      CHECK((impl->on_gpu() || !impl->unsupported(problem)));
      runnable += impl->unsupported(problem) ? 0 : 1;
    }
  }
  CHECK(sweep.cases == cases);
  CHECK(sweep.runs == runnable);
  for (const CaseResult& r : sweep.divergences) {
    INFO(r.impl << " " << r.description.label << ": "
                << (r.divergence ? r.divergence->output + " " + r.divergence->evidence : r.reason));
    CHECK(r.verdict == Verdict::pass);
  }
}

}  // namespace fc::test

// The whole detection matrix on a GPU: every fault x every implementation that has it, and
// a sweep of 500 clean random cases through every implementation.
#include "catch.h"
#include "harness/faults/matrix.h"
#include "kernels/implementation.h"

namespace fc {

TEST_CASE("the full fault matrix is right on stage, element and cause, without false alarms", "[gpu][faults]") {
  MatrixOptions options;
  options.gpu = true;
  const std::vector<MatrixCell> cells = run_fault_matrix(options);
  // One cell per fault each implementation declares: the catalog, which lists the
  // implementations per fault, must reach every one of them.
  std::size_t declared = 0;
  for (const auto& impl : make_implementations()) declared += impl->faults().size();
  CHECK(declared >= 20);
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
}

TEST_CASE("500 clean random cases through every implementation raise no alarm", "[gpu][sweep]") {
  const SweepResult sweep = run_clean_sweep(500, {}, true);
  CHECK(sweep.cases == 500);
  // The random cases use D 64 and 128, which every implementation runs: none may be skipped.
  CHECK(sweep.runs == 500 * static_cast<int>(make_implementations().size()));
  for (const CaseResult& r : sweep.divergences) {
    INFO(r.impl << " " << r.description.label << ": " << (r.divergence ? r.divergence->output + " " + r.divergence->evidence : r.reason));
    CHECK(r.verdict == Verdict::pass);
  }
}

}  // namespace fc

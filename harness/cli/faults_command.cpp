// flashcore-check faults: the detection matrix (every fault x every implementation that has
// it: expected vs found stage, element and cause, and the same case run clean) and a sweep of
// clean random cases; every figure as a count of what was run.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/faults/matrix.h"
#include "kernels/implementation.h"
#include "reports/table.h"
#include "stages/device_info.h"

namespace fc {
namespace {

std::string found_text(const MatrixCell& c) {
  if (!c.faulty.divergence) return std::string("not found (") + verdict_name(c.faulty.verdict) + ")";
  const Divergence& d = *c.faulty.divergence;
  return d.output + " " + index_string(d.index) + " " + d.cause;
}

std::string expected_text(const Expectation& e) {
  return e.output + " " + (e.index ? index_string(*e.index) : std::string("-")) + " " + e.cause;
}

std::string percent(int n, int total) {
  std::ostringstream s;
  s << n << "/" << total << " (" << (total ? 100 * n / total : 100) << "%)";
  return s.str();
}

}  // namespace

int run_faults(const FaultsCommand& command) {
  for (const std::string& id : command.faults) {
    if (!find_fault(id)) throw Error("--fault '" + id + "': unknown fault (`list` shows them)");
  }
  select_implementations(command.impls);  // an unknown name is an error, not an empty matrix
  const DeviceInfo device = device_info();
  if (!device.available) {
    std::cout << "no CUDA device (" << device.why_unavailable << "): the matrix covers the CPU implementations only\n";
  }
  MatrixOptions options{command.faults, command.impls, device.available, command.snapshots, command.command_line};
  const std::vector<MatrixCell> cells = run_fault_matrix(options);
  int fault_width = 22, impl_width = 20;  // plugins may bring longer names
  for (const MatrixCell& c : cells) {
    fault_width = std::max(fault_width, static_cast<int>(c.fault.size()) + 2);
    impl_width = std::max(impl_width, static_cast<int>(c.impl.size()) + 2);
  }
  std::cout << std::left << std::setw(fault_width) << "fault" << std::setw(impl_width) << "implementation" << std::setw(40)
            << "expected" << std::setw(44) << "found" << "clean  result\n";
  int stage = 0, index = 0, cause = 0, clean = 0;
  std::vector<CaseResult> results;
  std::vector<JunitCase> junit;
  for (const MatrixCell& c : cells) {
    stage += c.stage_ok;
    index += c.index_ok;
    cause += c.cause_ok;
    clean += c.clean_ok();
    std::cout << std::left << std::setw(fault_width) << c.fault << std::setw(impl_width) << c.impl << std::setw(40)
              << expected_text(c.expected) << std::setw(44) << found_text(c) << std::setw(7)
              << (c.clean_ok() ? "pass" : "ALARM") << (c.ok() ? "ok" : "WRONG") << "\n";
    results.push_back(c.faulty);
    JunitCase j = junit_case(c.faulty, "flashcore-check.faults." + c.impl, c.fault);
    j.status = c.ok() ? JunitCase::Status::passed : JunitCase::Status::failed;
    j.message = c.ok() ? "" : "expected " + expected_text(c.expected) + ", found " + found_text(c) +
                                  (c.clean_ok() ? "" : "; the clean run diverged: false alarm");
    junit.push_back(j);
  }
  const int n = static_cast<int>(cells.size());
  std::cout << "\n" << n << " fault x implementation cells: stage right " << percent(stage, n) << ", first index right "
            << percent(index, n) << ", cause right " << percent(cause, n) << "; clean runs without alarm "
            << percent(clean, n) << "\n";
  bool ok = stage == n && index == n && cause == n && clean == n;
  if (command.sweep > 0) {
    const SweepResult sweep = run_clean_sweep(command.sweep, command.impls, device.available);
    std::cout << "clean sweep: " << sweep.cases << " random cases, " << sweep.runs << " runs, "
              << sweep.divergences.size() << " divergences\n";
    for (const CaseResult& r : sweep.divergences) write_case_table(std::cout, r);
    ok = ok && sweep.divergences.empty();
  }
  if (command.long_sweep > 0) {
    const SweepResult sweep = run_clean_sweep(command.long_sweep, command.impls, device.available, true);
    std::cout << "long-context clean sweep: " << sweep.cases << " random cases, " << sweep.runs << " runs, "
              << sweep.divergences.size() << " divergences\n";
    for (const CaseResult& r : sweep.divergences) write_case_table(std::cout, r);
    ok = ok && sweep.divergences.empty();
  }
  write_report_files(command.reports, command.command_line, results, "faults", junit);
  return ok ? kExitPass : kExitDiverged;
}

}  // namespace fc

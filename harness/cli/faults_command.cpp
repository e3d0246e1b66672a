// flashcore-check faults: the detection matrix (every fault x every implementation that has
// it: expected vs found stage, element and cause, and the same case run clean) and a sweep of
// clean random cases; every figure as a count of what was run.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/faults/matrix.h"
#include "kernels/implementation.h"
#include "reports/progress.h"
#include "reports/table.h"
#include "reports/terminal.h"
#include "stages/device_info.h"

namespace fc {
namespace {

std::string index_or_dash(const Index4& i) { return i.b >= 0 ? index_string(i) : "-"; }

std::string found_text(const MatrixCell& c) {
  if (!c.faulty.divergence) return std::string("not found (") + verdict_name(c.faulty.verdict) + ")";
  const Divergence& d = *c.faulty.divergence;
  return d.output + " " + index_or_dash(d.index) + " " + d.cause;
}

std::string expected_text(const Expectation& e) {
  return e.output + " " + (e.index ? index_string(*e.index) : std::string("-")) + " " + e.cause;
}

std::string percent(int n, int total) {
  std::ostringstream s;
  s << n << "/" << total << " (" << (total ? 100 * n / total : 100) << "%)";
  return s.str();
}

// `word` padded to `width`, then painted: the padding stays outside the colour codes.
std::string column(const std::string& word, int width, bool colour) {
  const std::string padding(word.size() < static_cast<std::size_t>(width) ? width - word.size() : 0, ' ');
  return painted_verdict(word, colour) + padding;
}

}  // namespace

int run_faults(const FaultsCommand& command) {
  for (const std::string& id : command.faults) {
    if (!find_fault(id)) throw Error("--fault '" + id + "': unknown fault (`list` shows them)");
  }
  select_implementations(command.impls);  // an unknown name is an error, not an empty matrix
  check_report_files(command.reports);
  const DeviceInfo device = device_info();
  if (!device.available) {
    std::cerr << "no CUDA device (" << device.why_unavailable << "): the matrix covers the CPU implementations only\n";
  }
  std::ostream& out = detail_stream(command.quiet);
  const bool colour = colour_stdout();
  Progress progress("faults", 0);
  MatrixOptions options{command.faults, command.impls, device.available, command.snapshots, command.command_line,
                        &progress};
  const std::vector<MatrixCell> cells = run_fault_matrix(options);
  progress.clear();
  out << std::left << std::setw(22) << "fault" << std::setw(20) << "implementation" << std::setw(40) << "expected"
      << std::setw(44) << "found" << "clean  result\n";
  int stage = 0, index = 0, cause = 0, clean = 0;
  std::vector<CaseResult> results;
  std::vector<JunitCase> junit;
  for (const MatrixCell& c : cells) {
    stage += c.stage_ok;
    index += c.index_ok;
    cause += c.cause_ok;
    clean += c.clean_ok();
    out << std::left << std::setw(22) << c.fault << std::setw(20) << c.impl << std::setw(40) << expected_text(c.expected)
        << std::setw(44) << found_text(c) << column(c.clean_ok() ? "pass" : "ALARM", 7, colour)
        << painted_verdict(c.ok() ? "ok" : "WRONG", colour) << "\n";
    results.push_back(c.faulty);
    JunitCase j = junit_case(c.faulty, "flashcore-check.faults." + c.impl, c.fault);
    j.status = c.ok() ? JunitCase::Status::passed : JunitCase::Status::failed;
    j.message = c.ok() ? "" : "expected " + expected_text(c.expected) + ", found " + found_text(c) +
                                  (c.clean_ok() ? "" : "; the clean run diverged: false alarm");
    junit.push_back(j);
  }
  const int n = static_cast<int>(cells.size());
  bool ok = stage == n && index == n && cause == n && clean == n;
  out << "\n";
  std::ostringstream summary;
  summary << n << " fault x implementation cells: stage right " << percent(stage, n) << ", first index right "
          << percent(index, n) << ", cause right " << percent(cause, n) << "; clean runs without alarm "
          << percent(clean, n);
  if (command.sweep > 0) {
    const SweepResult sweep = run_clean_sweep(command.sweep, command.impls, device.available, &progress);
    progress.clear();
    for (const CaseResult& r : sweep.divergences) write_case_table(out, r, colour);
    summary << "; clean sweep: " << sweep.cases << " random cases, " << sweep.runs << " runs, "
            << sweep.divergences.size() << " divergences";
    ok = ok && sweep.divergences.empty();
  }
  std::cout << summary.str() << ": " << painted_verdict(ok ? "ok" : "WRONG", colour) << "\n";
  write_report_files(command.reports, command.command_line, results, "faults", junit);
  return ok ? kExitPass : kExitDiverged;
}

}  // namespace fc

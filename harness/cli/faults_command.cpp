// flashcore-check faults: the detection matrix (every fault x every implementation that has
// it: expected vs found stage, element and cause, and the same case run clean) and a sweep of
// clean random cases; every figure as a count of what was run.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/faults/matrix.h"
#include "harness/faults/matrix_table.h"
#include "harness/io/snapshot.h"
#include "kernels/implementation.h"
#include "reports/progress.h"
#include "reports/table.h"
#include "reports/terminal.h"
#include "stages/device_info.h"

namespace fc {
namespace {

std::string percent(int n, int total) {
  std::ostringstream s;
  s << n << "/" << total << " (" << (total ? 100 * n / total : 100) << "%)";
  return s.str();
}

// The detection matrix for the HTML report: each row links to its faulty run's section and
// carries the expected element (data-index), which the browser test checks the marker against.
HtmlTable matrix_table(const std::vector<MatrixCell>& cells, const std::vector<std::string>& sections) {
  HtmlTable t;
  t.id = "detection-matrix";
  t.title = "Detection matrix";
  t.caption = "every planted fault x every implementation that has it: the first divergence expected (stage output, "
              "element, cause) against the one found, and the same case run clean";
  t.header = {"fault", "implementation", "expected", "found", "clean run", "result"};
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const MatrixCell& c = cells[i];
    HtmlCell expected(expected_text(c.expected));
    expected.with("output", c.expected.output);
    if (c.expected.index) {
      const Index4& at = *c.expected.index;
      expected.with("index", std::to_string(at.b) + "," + std::to_string(at.h) + "," + std::to_string(at.row) + "," +
                                 std::to_string(at.col));
    }
    const std::string section = i < sections.size() ? sections[i] : "";
    t.rows.push_back({HtmlCell(c.fault, "", section.empty() ? "" : "#" + section).with("case", section),
                      HtmlCell(c.impl),
                      expected,
                      HtmlCell(found_text(c), c.stage_ok && c.index_ok && c.cause_ok ? "ok" : "bad"),
                      HtmlCell(c.clean_ok() ? "pass" : "ALARM", c.clean_ok() ? "ok" : "bad"),
                      HtmlCell(c.ok() ? "ok" : "WRONG", c.ok() ? "ok" : "bad")});
  }
  return t;
}

}  // namespace

int run_faults(const FaultsCommand& command) {
  for (const std::string& id : command.faults) {
    if (!find_fault(id)) throw Error("--fault '" + id + "': unknown fault (`list` shows them)");
  }
  select_implementations(command.impls);  // an unknown name is an error, not an empty matrix
  check_report_files(command.reports);
  const DeviceInfo device = device_info();
  Progress progress("faults", 0);
  MatrixOptions options{command.faults, command.impls, device.available, command.snapshots, command.command_line, {},
                        &progress, {}};
  // The matrix's cells, not the sweep's random cases: a name is checked against what the
  // report is sure to hold.
  if (!command.reports.html_stages.empty()) {
    require_selections("--html-stages", command.reports.html_stages, matrix_output_names(options));
  }
  if (!device.available) {
    std::cerr << "no CUDA device (" << device.why_unavailable << "): the matrix covers the CPU implementations only\n";
  }
  std::ostream& out = detail_stream(command.quiet);
  const bool colour = colour_stdout();
  HtmlReportBuilder html = html_report(command.reports, "faults", command.command_line);
  std::vector<std::string> faulty_sections;  // one per cell, in the matrix's order
  if (html.enabled()) {
    options.on_run = [&](const MatrixCell& cell, const AttentionInputs& inputs, const Judged& run, bool faulty) {
      const std::string id = html.add_case(inputs, run.run, run.result, run.references,
                                           faulty ? "fault " + cell.fault + " planted; expected " + expected_text(cell.expected)
                                                  : "clean run of the trigger case of " + cell.fault + ": a false alarm");
      if (faulty) faulty_sections.push_back(id);
    };
  }
  const std::vector<MatrixCell> cells = run_fault_matrix(options);
  progress.clear();
  write_matrix_table(out, cells, colour);
  int stage = 0, index = 0, cause = 0, clean = 0;
  std::vector<CaseResult> results;
  std::vector<JunitCase> junit;
  for (const MatrixCell& c : cells) {
    stage += c.stage_ok;
    index += c.index_ok;
    cause += c.cause_ok;
    clean += c.clean_ok();
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
  const auto on_divergence = [&](const AttentionInputs& inputs, const Judged& run) {
    html.add_case(inputs, run.run, run.result, run.references, "clean sweep: a false alarm");
  };
  for (const bool long_context : {false, true}) {
    const int cases = long_context ? command.long_sweep : command.sweep;
    if (cases <= 0) continue;
    const SweepResult sweep = run_clean_sweep(cases, command.impls, device.available, long_context,
                                              html.enabled() ? on_divergence : std::function<void(const AttentionInputs&, const Judged&)>{},
                                              &progress);
    progress.clear();
    for (const CaseResult& r : sweep.divergences) write_case_table(out, r, colour);
    summary << (long_context ? "; long-context clean sweep: " : "; clean sweep: ") << sweep.cases << " random cases, "
            << sweep.runs << " runs, " << sweep.divergences.size() << " divergences";
    ok = ok && sweep.divergences.empty();
  }
  std::cout << summary.str() << ": " << painted_verdict(ok ? "ok" : "WRONG", colour) << "\n";
  write_report_files(command.reports, command.command_line, results, "faults", junit);
  html.add_summary(matrix_table(cells, faulty_sections));
  html.write();
  if (!ok) return kExitDiverged;
  if (n == 0 && command.sweep <= 0 && command.long_sweep <= 0) {  // an empty matrix checks nothing
    return nothing_judged("no fault x implementation cell to run here");
  }
  return kExitPass;
}

}  // namespace fc

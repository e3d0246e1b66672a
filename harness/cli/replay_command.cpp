// flashcore-check replay FILE.h5: a snapshot judged again on the CPU, reported as the live
// run was (same table, pinpoint, JSON), and set beside the verdict it recorded.
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/io/snapshot.h"
#include "harness/trace/judge.h"
#include "reports/table.h"
#include "reports/terminal.h"

namespace fc {

int run_replay(const ReplayCommand& command) {
  check_report_files(command.reports);
  Snapshot s = read_snapshot(H5Reader(command.file));
  std::vector<std::string> output_names;
  add_output_names(s.run.graph, output_names);
  require_selections("--html-stages", command.reports.html_stages, output_names);
  std::vector<OutputReferences> references;
  const CaseResult result = judged_from_file(
      command.file, [&] { return judge_run(s.impl, s.file.inputs, s.file.description, s.run, &references, command.judge); });
  const bool colour = colour_stdout();
  std::ostream& out = detail_stream(command.quiet);
  out << "replay of " << command.file << " (" << s.file.kind << (s.fault.empty() ? "" : ", fault " + s.fault) << ")\n";
  write_case_table(out, result, colour);
  const bool agrees = result.verdict == s.recorded.verdict && same_divergence(result.divergence, s.recorded.divergence, true);
  std::cout << "replay of " << command.file << ": " << painted_verdict(verdict_name(result.verdict), colour)
            << "; recorded: " << outcome_text(s.recorded)
            << (agrees ? "; the replay agrees\n" : "; the replay " + painted("DIFFERS", Tone::bad, colour) + "\n");
  write_report_files(command.reports, command.command_line, {result}, "replay");
  HtmlReportBuilder html = html_report(command.reports, "replay", command.command_line);
  html.add_case(s.file.inputs, s.run, result, references,
                "replay of " + command.file + "; recorded: " + outcome_text(s.recorded) +
                    (agrees ? "; the replay agrees" : "; the replay DIFFERS"));
  html.write();
  return result.verdict == Verdict::pass ? kExitPass : kExitDiverged;
}

}  // namespace fc

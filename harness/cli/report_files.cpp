#include "harness/cli/report_files.h"

#include "core/resource_usage.h"
#include "harness/io/staged_file.h"
#include "harness/io/text_output.h"
#include "harness/version.h"
#include "reports/json_report.h"
#include "stages/device_info.h"

namespace fc {

void check_report_files(const ReportFiles& files) {
  if (!files.json.empty()) check_output_path(files.json);
  if (!files.junit.empty()) check_output_path(files.junit);
  if (!files.html.empty()) check_output_path(files.html);
}

void write_report_files(const ReportFiles& files, const std::string& command, const std::vector<CaseResult>& cases,
                        const std::string& suite, std::vector<JunitCase> junit,
                        const std::vector<InputFinding>& input_findings) {
  if (!files.json.empty()) {
    const RunInfo info{tool_version(), command, device_info().describe(), input_findings, peak_host_rss_bytes(),
                       peak_device_bytes()};
    write_text_file(files.json, [&](std::ostream& out) { write_json_report(out, info, cases); });
  }
  if (!files.junit.empty()) {
    if (junit.empty()) {
      for (const CaseResult& c : cases) junit.push_back(junit_case(c, "flashcore-check." + suite + "." + c.impl, c.description.label));
    }
    write_text_file(files.junit, [&](std::ostream& out) { write_junit(out, suite, junit); });
  }
}

HtmlReportBuilder html_report(const ReportFiles& files, const std::string& suite, const std::string& command) {
  FigureOptions options;
  options.stages = files.html_stages;
  return HtmlReportBuilder(files.html, "flashcore-check " + suite, command, options);
}

}  // namespace fc

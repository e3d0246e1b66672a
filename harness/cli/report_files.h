#pragma once
// The files every judging command can write beside its terminal report.
#include <string>
#include <vector>

#include "harness/html/html_builder.h"
#include "reports/case_result.h"
#include "reports/input_finding.h"
#include "reports/junit.h"

namespace fc {

struct ReportFiles {
  std::string json, junit, html;         // empty: not written
  std::vector<std::string> html_stages;  // outputs the HTML report draws besides the first divergence
};

// Refuses, before any work, a --json, --junit or --html path that could not be written.
void check_report_files(const ReportFiles& files);

// JSON of the cases; JUnit of `junit` (or, when empty, one testcase per case).
void write_report_files(const ReportFiles& files, const std::string& command, const std::vector<CaseResult>& cases,
                        const std::string& suite, std::vector<JunitCase> junit = {},
                        const std::vector<InputFinding>& input_findings = {});

// The command's HTML report (off without --html): add its cases as they are judged, then write().
HtmlReportBuilder html_report(const ReportFiles& files, const std::string& suite, const std::string& command);

}  // namespace fc

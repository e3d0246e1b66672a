#pragma once
// The files every judging command can write beside its terminal report.
#include <string>
#include <vector>

#include "reports/case_result.h"
#include "reports/input_finding.h"
#include "reports/junit.h"

namespace fc {

struct ReportFiles {
  std::string json, junit;  // empty: not written
};

// Refuses, before any work, a --json or --junit path that could not be written.
void check_report_files(const ReportFiles& files);

// JSON of the cases; JUnit of `junit` (or, when empty, one testcase per case).
void write_report_files(const ReportFiles& files, const std::string& command, const std::vector<CaseResult>& cases,
                        const std::string& suite, std::vector<JunitCase> junit = {},
                        const std::vector<InputFinding>& input_findings = {});

}  // namespace fc

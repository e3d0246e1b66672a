#pragma once
// The machine-readable report: every case with its stage outputs, metrics and first
// divergence under stable field names (docs/json-output.md).
#include <ostream>
#include <string>
#include <vector>

#include "reports/case_result.h"

namespace fc {

struct RunInfo {
  std::string command;  // the command line
  std::string device;   // "NVIDIA H100 80GB HBM3 (sm_90)" or "none"
  // triage: what the inputs say before any kernel, as (id, evidence)
  std::vector<std::pair<std::string, std::string>> input_findings;
};

void write_json_report(std::ostream& out, const RunInfo& info, const std::vector<CaseResult>& cases);

}  // namespace fc

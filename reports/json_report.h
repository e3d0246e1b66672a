#pragma once
// The machine-readable report: every case with its stage outputs, metrics and first
// divergence under stable field names (docs/json-output.md).
#include <ostream>
#include <string>
#include <vector>

#include "reports/case_result.h"
#include "reports/input_finding.h"

namespace fc {

struct RunInfo {
  std::string version;  // the tool's version
  std::string command;  // the command line
  std::string device;   // "NVIDIA H100 80GB HBM3 (sm_90)" or "none"
  std::vector<InputFinding> input_findings;  // triage: what the inputs say before any kernel
  std::int64_t peak_host_rss_bytes = 0;      // of the process, up to the report
  std::int64_t peak_device_bytes = 0;        // the harness's device allocations at their peak
};

void write_json_report(std::ostream& out, const RunInfo& info, const std::vector<CaseResult>& cases);

}  // namespace fc

#pragma once
// --trace --sanitize TOOL: the trace runs in a child flashcore-check under compute-sanitizer's
// TOOL (memcheck, racecheck, synccheck, initcheck) instead of in this process, so that a
// kernel's faults the numbers do not show (a race on shared memory that happened to leave
// every value right, an out-of-bounds read of a value that did not matter) are found beside
// the verdicts, which are that run's. The child's report prints as it runs; then what the tool
// found, grouped by message, device function and source line; --json gets it as "sanitizer"
// (docs/json-output.md). Exit 1 when the tool reports an error, else the child's status; 2
// when the run under the tool did not end normally (the tool's report is then incomplete).
#include <string>
#include <vector>

#include "harness/cli/report_files.h"

namespace fc {

inline constexpr const char* kSanitizerTools[] = {"memcheck", "racecheck", "synccheck", "initcheck"};

// `arguments`: this process's command line after the program name, --sanitize among them;
// `files`, `snapshot`: the outputs it names, refused here, before the run, as the trace would.
int run_sanitized_trace(const std::string& tool, const std::vector<std::string>& arguments, const ReportFiles& files,
                        const std::string& snapshot, const std::string& command_line);

// The compute-sanitizer to run: FC_COMPUTE_SANITIZER (when set and not empty), else the one on PATH, else in
// $CUDA_HOME/bin or /usr/local/cuda/bin; fc::Error saying where it looked when none is.
std::string find_compute_sanitizer();

// `arguments` without --sanitize and its value, and with --json's value replaced by `json`
// (nothing added when there is no --json).
std::vector<std::string> child_arguments(const std::vector<std::string>& arguments, const std::string& json);

}  // namespace fc

#pragma once
// The commands of flashcore-check. Each returns the process exit code:
// 0 every case passes, 1 a divergence was found, 2 usage, input or environment error (or
// nothing judged).
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/report_files.h"
#include "harness/plan.h"
#include "harness/trace/judge.h"

namespace fc {

inline constexpr int kExitPass = 0;
inline constexpr int kExitDiverged = 1;
inline constexpr int kExitUsage = 2;

// A command that judged nothing (every case skipped) has not passed: one line on stderr,
// "nothing was judged: WHY", and the usage status, so that a CI job running it does not pass.
inline int nothing_judged(const std::string& why) {
  std::cerr << "flashcore-check: nothing was judged: " << why << "\n";
  return kExitUsage;
}

struct TraceCommand {
  std::vector<std::string> impls;
  std::string inject;  // a fault to plant in every selected implementation that has it
  PlanOptions plan;
  ReportFiles reports;
  bool dump_descriptors = false;
  std::string snapshot;                      // write each judged case to this HDF5 file
  std::vector<std::string> snapshot_stages;  // which stage tensors the snapshot stores
  bool fixture = false;                      // write fixtures rather than snapshots
  JudgeOptions judge;
  std::string command_line;
  bool quiet = false;  // only the summary line
};
int run_trace(const TraceCommand& command);

struct ReplayCommand {
  std::string file;
  ReportFiles reports;
  JudgeOptions judge;
  std::string command_line;
  bool quiet = false;  // only the summary line
};
int run_replay(const ReplayCommand& command);

struct DiffCommand {
  std::string a, b;
  bool quiet = false;  // only the summary line
};
int run_diff(const DiffCommand& command);

struct FixturesCommand {
  std::string dir;
  ReportFiles reports;
  bool write_manifest = false;
  std::string command_line;
  bool quiet = false;  // only the summary line
};
int run_fixtures(const FixturesCommand& command);

struct FaultsCommand {
  std::vector<std::string> faults, impls;
  int sweep = 0;          // clean random cases after the matrix
  int long_sweep = 0;     // clean long-context random cases (4096 to 16384 keys)
  std::string snapshots;  // write each faulty run as a fixture into this folder
  ReportFiles reports;
  std::string command_line;
  bool quiet = false;  // only the summary line
};
int run_faults(const FaultsCommand& command);

struct TriageCommand {
  std::string report;
  std::vector<std::string> impls;
  std::string dtype;     // what fp32 inputs are rounded to for the kernels (fp16)
  std::string inject;    // plant this fault in the implementations that have it
  std::string minimize;  // write the smallest failing case here
  std::string arithmetic;  // how the kernel that wrote the report's outputs computes (as check's)
  ReportFiles reports;
  JudgeOptions judge;
  std::string command_line;
  bool quiet = false;  // only the summary line
};
int run_triage(const TriageCommand& command);

struct ReferenceCommand {
  std::string input;
  std::string out;
  std::int64_t page_width = 0;
  std::int64_t splits = 0;
  std::string command_line;
};
int run_reference(const ReferenceCommand& command);

int run_list();

struct CheckCommand {
  std::vector<std::string> paths;  // captures, or folders of them (harness/io/capture_file.h)
  std::string arithmetic;          // --arithmetic (harness/check/arithmetic_spec.h)
  ReportFiles reports;
  std::string command_line;
  bool quiet = false;  // only the summary line
};
int run_check(const CheckCommand& command);

struct DescribeCommand {
  std::string impl;
  std::string inject;
  PlanOptions plan;
};
int run_describe(const DescribeCommand& command);

struct BenchCommand {
  std::vector<std::string> impls;
  std::vector<std::string> shapes;
  std::vector<std::string> masks;  // none, causal
  std::string baseline_file;       // PyTorch SDPA TSV from scripts/sdpa_bench.py
  bool quick = false;
};
int run_bench(const BenchCommand& command);

struct SensitivityCommand {
  std::vector<std::string> impls, dtypes;
  std::vector<std::int64_t> kv_lens;
  int seeds = 4;
  std::int64_t rows = 32;
  JudgeOptions judge;
  ReportFiles reports;  // json and html
  std::string command_line;
};
int run_sensitivity(const SensitivityCommand& command);

int run_version();

}  // namespace fc

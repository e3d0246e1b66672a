#pragma once
// The commands of flashcore-check. Each returns the process exit code:
// 0 every case passes, 1 a divergence was found, 2 usage, input or environment error.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/plan.h"

namespace fc {

inline constexpr int kExitPass = 0;
inline constexpr int kExitDiverged = 1;
inline constexpr int kExitUsage = 2;

struct TraceCommand {
  std::vector<std::string> impls;
  std::string inject;  // a fault to plant in every selected implementation that has it
  PlanOptions plan;
  std::string json_path;
  bool dump_descriptors = false;
  std::string command_line;
};
int run_trace(const TraceCommand& command);

struct ReferenceCommand {
  std::string input;
  std::string out;
  std::int64_t page_width = 0;
  std::int64_t splits = 0;
  std::string command_line;
};
int run_reference(const ReferenceCommand& command);

int run_list();

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

int run_version();

}  // namespace fc

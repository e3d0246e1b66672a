#pragma once
// `flashcore-check sensitivity`: what the harness catches. A correct implementation runs on
// seeded cases at several key lengths; its captured stage outputs must pass (a divergence is
// a false alarm); then each perturbation (perturbation.h) is planted into the first stage of
// each kind it changes, and that stage is judged as a trace would judge it. Since every
// earlier stage passed, the planted stage is the first divergence exactly when it fails.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/sensitivity/perturbation.h"
#include "kernels/implementation.h"
#include "reports/case_result.h"

namespace fc {

struct SensitivityOptions {
  std::vector<std::int64_t> kv_lens{512, 4096, 16384, 65536};
  std::vector<DType> dtypes{DType::f16, DType::bf16};
  std::int64_t q_len = 32;  // query rows of every case: the rows judged
  std::int64_t head_dim = 64;
  int seeds = 4;            // trials of every cell, each on its own inputs
  std::vector<double> deltas;  // element-scale: the factors 1 + delta tried (default 2^-1 .. 2^-16)
  BoundChoice judged_by = BoundChoice::tight;
};

// One perturbation planted into one stage kind, at one key length and dtype.
struct SensitivityCell {
  std::string impl;
  DType dtype = DType::f16;
  std::int64_t kv_len = 0;
  std::string perturbation;  // perturbation id
  double delta = 0;          // element-scale only
  std::string stage_kind;    // "qk", "softmax", "pv", ...
  int stage_order = 0;       // where the kind first appears in the stage graph
  std::string stage;         // the stage output planted, in the last trial
  int trials = 0, detected = 0, index_right = 0;
  std::optional<Index4> first_index;  // where the first trial that was caught was caught
};

struct SensitivityResult {
  std::vector<SensitivityCell> cells;
  int clean_runs = 0;
  std::vector<CaseResult> false_alarms;  // clean runs that did not pass
  std::vector<std::string> skipped;      // "wmma-fused: head dim must be 64 or 128"
};

// `progress`, when given, is called after each clean run with (done, total).
SensitivityResult measure_sensitivity(Implementation& impl, const SensitivityOptions& options,
                                      const std::function<void(int, int)>& progress = {});

// The element-scale factors tried by default: 2^-1 down to 2^-16.
std::vector<double> default_deltas();

}  // namespace fc

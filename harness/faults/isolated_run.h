#pragma once
// A faulty run that may hang the device or leave it unusable (a race on a pipeline's
// barriers: a trap, a deadlock) runs in a child flashcore-check, so that the matrix goes on
// after it. The child judges the trigger case with `--trace --json` under a short
// FC_RUN_TIMEOUT; its exit status and JSON come back as a CaseResult. A child that hangs
// (core/watchdog.h, kExitHang) is a divergence with cause `hang`: the harness caught the
// kernel never finishing.
#include <string>

#include "harness/inputs.h"
#include "harness/trace/row_sample.h"
#include "reports/case_result.h"

namespace fc {

// The --shape, --mask, --dtype, --dist, --seed (and --scale) arguments that give `spec`.
std::vector<std::string> case_arguments(const CaseSpec& spec);

// `executable`: the flashcore-check to run (empty: this process's own).
CaseResult judge_in_child(const std::string& executable, const std::string& impl, const std::string& fault,
                          const CaseSpec& trigger, const RowSpec& rows, double timeout_seconds);

}  // namespace fc

#pragma once
// Judging one implementation on one case: traced run, comparison, attribution, verdict. A
// replay judges a run read back from a snapshot the same way, with no GPU.
#include "harness/trace/evaluate.h"
#include "harness/trace/session.h"
#include "reports/case_result.h"

namespace fc {

CaseDescription describe_case(const AttentionInputs& inputs, const std::string& label, const std::string& mask,
                              const std::string& dist, std::optional<std::uint64_t> seed);

// Comparison and attribution of a finished run (live, or read from a snapshot).
CaseResult judge_run(const std::string& impl, const AttentionInputs& inputs, const CaseDescription& description,
                     const TraceRun& run, std::vector<OutputReferences>* references = nullptr);

struct Judged {
  CaseResult result;
  TraceRun run;
  std::vector<OutputReferences> references;  // when asked for (snapshots)
};

Judged judge_case_keeping(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                          const DeviceInputs* device, bool keep_references);

CaseResult judge_case(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                      const DeviceInputs* device);

}  // namespace fc

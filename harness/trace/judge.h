#pragma once
// Judging one implementation on one case: traced run, comparison, attribution, verdict.
#include "harness/trace/session.h"
#include "reports/case_result.h"

namespace fc {

CaseDescription describe_case(const AttentionInputs& inputs, const std::string& label, const std::string& mask,
                              const std::string& dist, std::optional<std::uint64_t> seed);

CaseResult judge_case(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                      const DeviceInputs* device);

}  // namespace fc

#include "harness/trace/judge.h"

#include <chrono>

#include "core/error.h"
#include "harness/trace/attribute.h"
#include "harness/trace/evaluate.h"

namespace fc {

CaseDescription describe_case(const AttentionInputs& inputs, const std::string& label, const std::string& mask,
                              const std::string& dist, std::optional<std::uint64_t> seed) {
  CaseDescription d;
  d.label = label;
  d.shape = inputs.problem.shape;
  d.dtype = inputs.problem.dtype;
  d.mask = mask;
  d.dist = dist;
  d.source = inputs.source;
  d.seed = seed;
  d.scale = inputs.problem.scale;
  return d;
}

CaseResult judge_case(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                      const DeviceInputs* device) {
  const auto start = std::chrono::steady_clock::now();
  CaseResult result;
  result.impl = impl.name();
  result.description = description;
  if (const std::optional<std::string> why = impl.unsupported(inputs.problem)) {
    result.verdict = Verdict::skipped;
    result.reason = *why;
    return result;
  }
  const TraceRun run = run_traced(impl, inputs, device, true);
  result.algorithm = run.graph.algorithm.describe();
  if (!run.error.empty()) {
    result.verdict = Verdict::error;
    result.reason = run.error;
  } else {
    result.descriptors = run.descriptors;
    result.outputs = evaluate_outputs(inputs, run);
    result.divergence = attribute(inputs, run, result.outputs);
    result.verdict = result.divergence ? Verdict::diverged : Verdict::pass;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace fc

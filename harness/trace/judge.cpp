#include "harness/trace/judge.h"

#include "core/error.h"
#include "core/stopwatch.h"
#include "harness/trace/attribute.h"
#include "harness/trace/repeatability.h"
#include "harness/trace/windows.h"
#include "reference/gpu/gpu_evaluator.h"
#include "stages/device_memory.h"

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

ReferenceDevice parse_reference_device(const std::string& text) {
  if (text == "cpu") return ReferenceDevice::cpu;
  if (text == "gpu") return ReferenceDevice::gpu;
  if (text == "auto") return ReferenceDevice::automatic;
  throw Error("--reference '" + text + "': expected cpu, gpu or auto");
}

namespace {

// Whether attribution will look into the captured numbers: some output failed or some
// cuBLASLt call has a finding (a clean run at any size reads none of them on the host).
bool attribution_reads_captures(const CaseResult& result, const TraceRun& run) {
  for (const OutputResult& r : result.outputs) {
    if (!r.passed()) return true;
  }
  for (const DescriptorReport& d : run.descriptors) {
    if (!d.findings.empty()) return true;
  }
  return false;
}

}  // namespace

CaseResult judge_run(const std::string& impl, const AttentionInputs& inputs, const CaseDescription& description,
                     TraceRun& run, std::vector<OutputReferences>* references, const JudgeOptions& options,
                     const RowSample* rows) {
  CaseResult result;
  result.impl = impl;
  result.description = description;
  result.algorithm = run.graph.algorithm.describe();
  result.descriptors = run.descriptors;
  if (!run.error.empty()) {
    result.verdict = Verdict::error;
    result.reason = run.error;
    return result;
  }
  std::vector<OutputReferences> own;
  std::vector<OutputReferences>& refs = references ? *references : own;
  const RowSample sample = rows ? *rows : sample_rows(inputs.problem, run.graph, options.rows);
  result.coverage = sample.all ? "" : sample.coverage;
  const std::unique_ptr<EvaluatorSource> gpu =
      options.reference == ReferenceDevice::gpu ? gpu_evaluators(inputs.problem.shape.head_dim)
                                                : std::unique_ptr<EvaluatorSource>();
  const EvaluatorSource& evaluators = gpu ? *gpu : host_evaluators();
  result.reference_device = evaluators.device();
  const std::int64_t block = evaluators.block_elements();
  // One K/V id a head for both evaluations below, so that a GPU's device copies serve both.
  HeadKvCache kv(inputs, HeadKvCache::Keep::while_needed);
  StepProfile steps;
  StepProfile* const profile = options.profile_evaluation ? &steps : nullptr;
  Stopwatch watch;
  if (references) {
    result.outputs = evaluate_outputs(inputs, run, &refs, options.judged_by, &sample, block, std::nullopt,
                                      evaluators, &kv, profile);
    result.phases.evaluation = watch.lap();
    bring_to_host(run.captured);  // the references are kept for snapshots and reports, which read the captures
    result.divergence = attribute(inputs, run, result.outputs, refs, &sample);
  } else {
    // References are held only where a hypothesis reads them: the failing output's, computed
    // again when asked for (a clean run holds no FP64 tensor of a whole output at all).
    result.outputs = evaluate_outputs(inputs, run, nullptr, options.judged_by, &sample, block, std::nullopt,
                                      evaluators, &kv, profile);
    result.phases.evaluation = watch.lap();
    if (attribution_reads_captures(result, run)) bring_to_host(run.captured);
    std::optional<std::size_t> computed;
    const ReferenceSource source = [&](std::size_t i) -> const std::vector<OutputReferences>& {
      if (computed != i) {
        evaluate_outputs(inputs, run, &refs, options.judged_by, &sample, block, i, evaluators, &kv);
        computed = i;
      }
      return refs;
    };
    result.divergence = attribute(inputs, run, result.outputs, source, &sample);
  }
  result.phases.attribution = watch.lap();
  result.evaluation_steps = steps.steps();
  result.verdict = result.divergence ? Verdict::diverged : Verdict::pass;
  return result;
}

Judged judge_case_keeping(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                          const DeviceInputs* device, bool keep_references, const JudgeOptions& options) {
  Stopwatch total, watch;
  Judged j;
  std::optional<std::string> why = impl.unsupported(inputs.problem);
  // A CPU implementation that cannot trace this case here is declined before it runs (a GPU one
  // is refused by the run itself, which knows the device it runs on).
  if (!why && !impl.on_gpu()) why = trace_does_not_fit(impl, inputs.problem);
  if (why) {
    j.result.impl = impl.name();
    j.result.description = description;
    j.result.verdict = Verdict::skipped;
    j.result.reason = *why;
    return j;
  }
  JudgeOptions resolved = options;
  if (resolved.reference == ReferenceDevice::automatic) {
    resolved.reference = impl.on_gpu() && cuda_device_available() ? ReferenceDevice::gpu : ReferenceDevice::cpu;
  }
  if (const std::int64_t rows =
          window_rows_for(impl, inputs, impl.stage_graph(inputs.problem), resolved, keep_references)) {
    return judge_in_windows(impl, inputs, description, device, resolved, rows);
  }
  // Judged on the GPU, the captures stay there (where it has room) rather than cross twice.
  j.run = run_traced(impl, inputs, device, true, resolved.reference == ReferenceDevice::gpu);
  const double traced = watch.lap();
  if (options.production && impl.has_production_build() && j.run.error.empty()) {
    j.run.production = run_production(impl, inputs, device, j.run.graph);
  }
  const double production = watch.lap();
  j.result = judge_run(impl.name(), inputs, description, j.run, keep_references ? &j.references : nullptr, resolved);
  watch.lap();
  if (j.result.divergence && j.result.divergence->cause == "unknown") {
    test_repeatability(impl, inputs, device, j.run, *j.result.divergence);
  }
  j.result.phases.repeatability = watch.lap();
  j.result.phases.traced_run = traced;
  j.result.phases.production_run = production;
  j.result.seconds = total.lap();
  return j;
}

CaseResult judge_case(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                      const DeviceInputs* device, const JudgeOptions& options) {
  return judge_case_keeping(impl, inputs, description, device, false, options).result;
}

}  // namespace fc

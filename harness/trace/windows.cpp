#include "harness/trace/windows.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "core/resource_usage.h"
#include "core/stopwatch.h"
#include "harness/trace/attribute.h"
#include "harness/trace/repeatability.h"
#include "reference/gpu/gpu_evaluator.h"

namespace fc {
namespace {

// Bytes of its trace build's buffers a query row takes.
double trace_bytes_a_row(const Implementation& impl, const Problem& p) {
  return static_cast<double>(trace_bytes_in(impl, p, RowWindow{0, 1}));
}

// Rows in whole query tiles, one at least.
std::int64_t whole_tiles(std::int64_t rows, std::int64_t query_tile) {
  const std::int64_t tile = std::max<std::int64_t>(query_tile, 1);
  return std::max(tile, rows / tile * tile);
}

// What a run's captures may take on the host: they come there when a divergence is attributed,
// and its repeatability test traces the run again, so a third of what the host has.
double host_capture_budget() { return static_cast<double>(available_host_bytes()) / 3; }

}  // namespace

std::int64_t window_rows_for(const Implementation& impl, const AttentionInputs& inputs, const StageGraph& graph,
                             const JudgeOptions& options, bool keep_references) {
  const Problem& p = inputs.problem;
  if (!impl.on_gpu() || !impl.traces_in_windows() || p.layout.varlen() || keep_references || options.whole_trace ||
      p.shape.q_len == 0) {
    return 0;
  }
  if (options.window_rows > 0) {
    return options.window_rows >= p.shape.q_len ? 0 : whole_tiles(options.window_rows, graph.query_tile);
  }
  std::size_t free = 0, total = 0;
  FC_CUDA(cudaMemGetInfo(&free, &total));
  const double per_row = trace_bytes_a_row(impl, p);
  // Beside the buffers the device keeps, for a reference on the GPU, what it holds at once
  // beyond what its pools hold already (they keep it from window to window), and what the
  // implementation allocates while it runs (run_allowance). The buffers take the rest when their
  // captures stay in them for a reference on the GPU, half of it when each is copied beside them
  // (or to the host, for a reference on the CPU).
  const bool gpu_reference = options.reference == ReferenceDevice::gpu;
  const double reference = gpu_reference ? static_cast<double>(reference_room(p)) : 0.0;
  const double spare = static_cast<double>(free) - reference - static_cast<double>(run_allowance());
  const bool kept = impl.captures_stay_in_buffers() && gpu_reference;
  // Never less than 35% of what is free (and as much again for copies), the rule before
  // 2026-11-27: what a device with little more than that working set free, or shared with other
  // processes, keeps getting.
  const double budget = std::max(0.35 * static_cast<double>(free), spare / (kept ? 1 : 2));
  const double whole = per_row * static_cast<double>(p.shape.q_len);
  if (whole <= budget && whole <= host_capture_budget()) return 0;
  return std::min(p.shape.q_len, whole_tiles(static_cast<std::int64_t>(budget / per_row), graph.query_tile));
}

RowSample rows_in(const RowSample& sample, const Shape& shape, const RowWindow& w) {
  RowSample part;
  part.all = false;
  part.per_head.resize(static_cast<std::size_t>(shape.batch * shape.heads));
  for (std::size_t bh = 0; bh < part.per_head.size(); ++bh) {
    std::vector<std::int64_t>& rows = part.per_head[bh];
    if (sample.all) {
      for (std::int64_t r = w.first; r < w.first + w.rows; ++r) rows.push_back(r);
    } else {
      for (std::int64_t r : sample.per_head[bh]) {
        if (w.holds(r)) rows.push_back(r);
      }
    }
    part.judged += static_cast<std::int64_t>(rows.size());
  }
  return part;
}

void fold_window(OutputResult& into, const OutputResult& next) {
  if (next.compared) {
    if (!into.compared) {
      into.end_to_end = next.end_to_end;
      into.local = next.local;
    } else {
      merge_metrics(into.end_to_end, next.end_to_end);
      merge_metrics(into.local, next.local);
    }
    into.compared = true;
  }
  if (!into.production) merge_flags(into.flags, next.flags, 0);  // first indices are the whole output's already
  into.present = into.present && next.present;
  if (into.capture_problem.empty()) into.capture_problem = next.capture_problem;
  into.compared_with_trace = into.compared_with_trace || next.compared_with_trace;
}

std::optional<std::int64_t> first_failing_row(const std::vector<OutputResult>& outputs) {
  for (const OutputResult& r : outputs) {
    if (r.passed()) continue;
    if (const std::optional<Failure> f = failing_element(r)) return f->element.index.row;
    for (unsigned long long flat : {r.flags.first_unwritten, r.flags.first_nan}) {
      if (flat != kNoIndex) return r.index_of(flat).row;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

RowWindow attribution_window(std::int64_t row, std::int64_t max_rows, std::int64_t query_tile, std::int64_t q_len) {
  const std::int64_t tile = std::max<std::int64_t>(query_tile, 1);
  const std::int64_t first = row / tile * tile;
  return RowWindow{first, std::min(whole_tiles(max_rows, tile), q_len - first)};
}

Divergence unreproduced(const std::vector<OutputResult>& outputs) {
  Divergence d;
  for (const OutputResult& r : outputs) {
    if (r.passed()) continue;
    d.output = r.name;
    d.stage = r.stage_name;
    d.cause = "unknown";
    d.evidence = r.name + " failed in its window of rows, and the window traced again for attribution did not";
    if (const std::optional<Failure> f = failing_element(r)) name_element(d, *f);
    break;
  }
  return d;
}

Judged judge_in_windows(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                        const DeviceInputs* device, const JudgeOptions& options, std::int64_t window_rows) {
  Stopwatch total, watch;
  Judged j;
  CaseResult& result = j.result;
  const Problem& p = inputs.problem;
  const StageGraph graph = impl.stage_graph(p);
  const RowSample sample = sample_rows(p, graph, options.rows);
  result.impl = impl.name();
  result.description = description;
  result.algorithm = graph.algorithm.describe();
  result.window_rows = window_rows;
  result.coverage = (sample.all ? std::string("every row") : sample.coverage) + "; traced in windows of " +
                    std::to_string(window_rows) + " query rows, each judged and dropped before the next";
  ProductionRun production;
  if (options.production && impl.has_production_build()) production = run_production(impl, inputs, device, graph);
  result.phases.production_run = watch.lap();
  {  // the windows' evaluators and K/V go before attribution, which judges with its own
    const std::unique_ptr<EvaluatorSource> gpu =
        options.reference == ReferenceDevice::gpu ? gpu_evaluators(inputs.problem.shape.head_dim)
                                                : std::unique_ptr<EvaluatorSource>();
    const EvaluatorSource& evaluators = gpu ? *gpu : host_evaluators();
    result.reference_device = evaluators.device();
    HeadKvCache kv(inputs, HeadKvCache::Keep::for_next_call);  // every window judges every head again
    StepProfile steps;
    StepProfile* const profile = options.profile_evaluation ? &steps : nullptr;
    for (std::int64_t first = 0; first < p.shape.q_len; first += window_rows) {
      const RowWindow w{first, std::min(window_rows, p.shape.q_len - first)};
      const RowSample part = rows_in(sample, p.shape, w);  // none: its flags alone
      TraceRun run = run_traced(impl, inputs, device, true, options.reference == ReferenceDevice::gpu, w);
      result.phases.traced_run += watch.lap();
      if (!run.error.empty()) {
        result.verdict = Verdict::error;
        result.reason = "query rows " + std::to_string(w.first) + ".." + std::to_string(w.first + w.rows - 1) + ": " +
                        run.error;
        result.descriptors = run.descriptors;
        return j;
      }
      run.production = std::move(production);  // lent to each window, never copied
      const std::vector<OutputResult> outputs = evaluate_outputs(
          inputs, run, nullptr, options.judged_by, &part, evaluators.block_elements(), std::nullopt, evaluators, &kv,
          profile);
      production = std::move(run.production);
      result.phases.evaluation += watch.lap();
      if (result.outputs.empty()) {
        result.outputs = outputs;
        result.descriptors = run.descriptors;
      } else {
        for (std::size_t i = 0; i < outputs.size(); ++i) fold_window(result.outputs[i], outputs[i]);
      }
    }
    result.evaluation_steps = steps.steps();
  }
  const bool failed = std::any_of(result.outputs.begin(), result.outputs.end(),
                                  [](const OutputResult& r) { return !r.passed(); });
  if (failed) {
    const std::int64_t row = first_failing_row(result.outputs).value_or(0);
    const double host_rows = host_capture_budget() / std::max(trace_bytes_a_row(impl, p), 1.0);
    const std::int64_t max_rows =
        std::min({window_rows, kAttributionRows, static_cast<std::int64_t>(std::min(host_rows, 1e15))});
    const RowWindow w = attribution_window(row, max_rows, graph.query_tile, p.shape.q_len);
    TraceRun run = run_traced(impl, inputs, device, true, options.reference == ReferenceDevice::gpu, w);
    run.production = std::move(production);
    const RowSample part = rows_in(sample, p.shape, w);
    const CaseResult attributed = judge_run(impl.name(), inputs, description, run, nullptr, options, &part);
    if (attributed.verdict == Verdict::error) {
      result.verdict = Verdict::error;
      result.reason = "tracing the window of rows " + std::to_string(w.first) + ".. again: " + attributed.reason;
      return j;
    }
    result.divergence = attributed.divergence ? attributed.divergence : unreproduced(result.outputs);
    result.phases.attribution = watch.lap();
    if (result.divergence && result.divergence->cause == "unknown") {
      test_repeatability(impl, inputs, device, run, *result.divergence);
    }
    result.phases.repeatability = watch.lap();
    j.run = std::move(run);
  }
  if (!result.divergence) {  // no window kept: the run's graph and calls, for the report
    j.run.graph = graph;
    j.run.descriptors = result.descriptors;
  }
  result.verdict = failed ? Verdict::diverged : Verdict::pass;
  result.seconds = total.lap();
  return j;
}

}  // namespace fc

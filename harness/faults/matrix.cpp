#include "harness/faults/matrix.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "harness/faults/isolated_run.h"
#include "harness/io/snapshot.h"
#include "harness/random_cases.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"

namespace fc {
namespace {

bool selected(const std::vector<std::string>& list, const std::string& name) {
  return list.empty() || std::find(list.begin(), list.end(), name) != list.end();
}

void grade(MatrixCell& cell) {
  const std::optional<Divergence>& d = cell.faulty.divergence;
  const Expectation& e = cell.expected;
  if (e.output == "*") {  // a race: found at all is right
    cell.stage_ok = cell.index_ok = cell.cause_ok = d.has_value();
    return;
  }
  cell.stage_ok = d && d->output == e.output;
  cell.cause_ok = d && (e.cause == "*" || d->cause == e.cause);
  cell.index_ok = d && (!e.index || d->index == *e.index);
}

// Is implementation `name` selected and able to run here?
bool runs_here(const MatrixOptions& options, const std::string& name) {
  if (!selected(options.impls, name)) return false;
  const std::unique_ptr<Implementation> impl = make_implementation(name);
  return impl && (!impl->on_gpu() || options.gpu);
}

}  // namespace

std::vector<std::string> matrix_output_names(const MatrixOptions& options) {
  std::vector<std::string> names;
  for (const FaultSpec& spec : fault_catalog()) {
    if (!selected(options.faults, spec.id)) continue;
    const Problem problem = make_problem(spec.trigger);
    for (const std::string& name : spec.impls) {
      if (!runs_here(options, name)) continue;
      std::unique_ptr<Implementation> impl = make_implementation(name);
      impl->inject(spec.id);
      add_output_names(impl->stage_graph(problem), names);
    }
  }
  return names;
}

std::vector<MatrixCell> run_fault_matrix(const MatrixOptions& options) {
  std::vector<MatrixCell> cells;
  if (options.progress) {
    std::int64_t total = 0;
    for (const FaultSpec& spec : fault_catalog()) {
      if (!selected(options.faults, spec.id)) continue;
      for (const std::string& name : spec.impls) total += runs_here(options, name);
    }
    options.progress->add_total(total);
  }
  for (const FaultSpec& spec : fault_catalog()) {
    if (!selected(options.faults, spec.id)) continue;
    // One trigger case per fault, shared by the implementations that have it.
    const AttentionInputs inputs = generate_inputs(spec.trigger);
    const CaseDescription description =
        describe_case(inputs, spec.trigger.label(), spec.trigger.mask, spec.trigger.dist, spec.trigger.seed);
    std::unique_ptr<DeviceInputs> device;
    for (const std::string& name : spec.impls) {
      if (!runs_here(options, name)) continue;
      std::unique_ptr<Implementation> impl = make_implementation(name);
      if (impl->on_gpu() && !device) device = std::make_unique<DeviceInputs>(inputs, nullptr);

      MatrixCell cell;
      cell.fault = spec.id;
      cell.impl = name;
      const bool observed = options.on_run && spec.keep_as_fixture;  // a cell too large to keep is in no report
      JudgeOptions judging;
      judging.rows = spec.rows;
      {  // the clean run's captures (device copies among them) go before the faulty run
        const Judged clean = judge_case_keeping(*impl, inputs, description, device.get(), observed, judging);
        cell.clean = clean.result;
        if (observed && !cell.clean_ok()) options.on_run(cell, inputs, clean, false);
      }
      impl->inject(spec.id);
      cell.expected = spec.expect(inputs, impl->stage_graph(inputs.problem));
      if (spec.isolated) {  // it may hang or fault the device: a child process runs it
        cell.faulty = judge_in_child(options.executable, name, spec.id, spec.trigger, spec.rows,
                                     spec.isolated_timeout_seconds);
        cell.faulty.description = description;
        grade(cell);
      } else {
        const bool snapshot = !options.snapshots.empty() && spec.keep_as_fixture;
        const Judged faulty =
            judge_case_keeping(*impl, inputs, description, device.get(), snapshot || observed, judging);
        cell.faulty = faulty.result;
        grade(cell);
        if (observed) options.on_run(cell, inputs, faulty, true);
        if (snapshot) {
          SnapshotOptions s;
          s.kind = "fixture";
          s.fault = spec.id;
          s.final_reference_only = true;
          const std::string file = spec.id + "." + name + ".h5";
          write_snapshot((std::filesystem::path(options.snapshots) / file).string(), options.command_line, inputs,
                         faulty.run, faulty.result, faulty.references, s);
        }
      }
      cells.push_back(std::move(cell));
      if (options.progress) options.progress->advance();
    }
  }
  return cells;
}

SweepResult run_clean_sweep(int cases, const std::vector<std::string>& impls, bool gpu, bool long_context,
                            const std::function<void(const AttentionInputs&, const Judged&)>& on_divergence,
                            Progress* progress) {
  SweepResult sweep;
  std::vector<std::unique_ptr<Implementation>> all;
  for (auto& impl : make_implementations()) {
    if (selected(impls, impl->name()) && (!impl->on_gpu() || gpu)) all.push_back(std::move(impl));
  }
  for (int i = 1; i <= cases; ++i) {
    const std::uint64_t seed = static_cast<std::uint64_t>(10000 + i);
    const CaseSpec spec = long_context ? random_long_case(seed).spec : random_case(seed).spec;
    const AttentionInputs inputs = generate_inputs(spec);
    const CaseDescription description = describe_case(inputs, spec.label(), spec.mask, spec.dist, spec.seed);
    std::unique_ptr<DeviceInputs> device;
    if (progress && i == 1) progress->add_total(cases);
    for (auto& impl : all) {
      Judged judged;
      try {
        if (impl->on_gpu() && !device) device = std::make_unique<DeviceInputs>(inputs, nullptr);
        judged = judge_case_keeping(*impl, inputs, description, device.get(), static_cast<bool>(on_divergence));
      } catch (const Error& e) {  // a device fault outside the run: say where, and stop (the context is gone)
        CaseResult r;
        r.impl = impl->name();
        r.description = description;
        r.verdict = Verdict::error;
        r.reason = e.what();
        sweep.divergences.push_back(r);
        ++sweep.runs;
        return sweep;
      }
      const CaseResult& r = judged.result;
      if (r.verdict == Verdict::skipped) continue;
      ++sweep.runs;
      if (r.verdict == Verdict::pass) continue;
      sweep.divergences.push_back(r);
      if (on_divergence) on_divergence(inputs, judged);
    }
    ++sweep.cases;
    if (progress) progress->advance();
  }
  return sweep;
}

}  // namespace fc

// flashcore-check triage REPORT [--impl ...] [--minimize OUT.h5]: a NaN bug report, from its
// inputs (CPU, before any kernel) to the first bad stage of each implementation, and down to
// the smallest case that still fails the same way.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include "core/error.h"
#include "harness/check/captured.h"
#include "harness/check/arithmetic_spec.h"
#include "harness/cli/commands.h"
#include "harness/io/case_loader.h"
#include "harness/io/snapshot.h"
#include "harness/io/staged_file.h"
#include "harness/triage/input_findings.h"
#include "harness/trace/judge.h"
#include "harness/triage/minimize.h"
#include "kernels/common/device_inputs.h"
#include "reference/attention.h"
#include "reports/progress.h"
#include "reports/table.h"
#include "reports/terminal.h"
#include "stages/device_info.h"

namespace fc {
namespace {

// The implementations to run: those named (all when none is), with the fault planted where
// asked; a GPU one needs a device. Refused before any output.
std::vector<std::unique_ptr<Implementation>> chosen(const TriageCommand& command, const DeviceInfo& device) {
  std::vector<std::unique_ptr<Implementation>> impls = select_implementations(command.impls);
  if (!command.inject.empty()) impls = with_fault(std::move(impls), command.inject);
  std::vector<std::unique_ptr<Implementation>> runnable;
  for (auto& impl : impls) {
    if (impl->on_gpu() && !device.available) {
      if (!command.impls.empty()) throw Error("--impl " + impl->name() + " needs a CUDA device: " + device.why_unavailable);
      continue;
    }
    runnable.push_back(std::move(impl));
  }
  if (runnable.empty() && !command.inject.empty()) {
    throw Error("--inject " + command.inject + ": only GPU implementations have this fault, and there is no CUDA device (" +
                device.why_unavailable + ")");
  }
  return runnable;
}

HtmlTable input_findings_table(const std::vector<InputFinding>& findings) {
  HtmlTable t;
  t.id = "input-findings";
  t.title = "Input findings";
  t.caption = findings.empty() ? "none: the inputs hold no NaN, Inf, fully masked row or overflow risk"
                               : "what the inputs say before any kernel runs (CPU, FP64)";
  t.header = {"cause", "tensor", "first place (b,h,row,col)", "detail"};
  for (const InputFinding& f : findings) {
    t.rows.push_back({HtmlCell(f.cause, f.defect ? "bad" : ""), HtmlCell(f.tensor),
                      HtmlCell(f.index ? index_string(*f.index) : "-"), HtmlCell(f.detail)});
  }
  return t;
}

}  // namespace

int run_triage(const TriageCommand& command) {
  const ArithmeticSpec spec = command.arithmetic.empty() ? ArithmeticSpec{} : parse_arithmetic(command.arithmetic);
  const DeviceInfo device = device_info();
  std::vector<std::unique_ptr<Implementation>> impls = chosen(command, device);
  check_report_files(command.reports);
  if (!command.minimize.empty()) check_output_path(command.minimize);
  const LoadedCase report = load_case(command.report);
  const Problem& p = report.inputs.problem;
  if (!command.dtype.empty() && p.dtype != DType::f32 && *parse_dtype(command.dtype) != p.dtype) {
    throw Error("--dtype " + command.dtype + ": the report's inputs are " + dtype_name(p.dtype) +
                "; --dtype chooses what fp32 inputs are rounded to");
  }
  const DType kernel_dtype = p.dtype == DType::f32 ? (command.dtype.empty() ? DType::f16 : *parse_dtype(command.dtype)) : p.dtype;
  const CaptureFile seen = read_capture_file(command.report);
  if (!command.arithmetic.empty() && seen.outputs.empty()) {
    throw Error("--arithmetic describes the kernel that wrote the report's outputs, and " + command.report +
                " holds none (out, lse, scores, ...)");
  }
  const AttentionInputs inputs = for_kernels(report.inputs, kernel_dtype);
  // The kernel that wrote the report's outputs read q, k and v in the format --arithmetic
  // declares: fp32 inputs declared 16-bit are judged rounded to it, as the implementations get
  // theirs (the same copy where the formats agree). Its arithmetic is checked against the file
  // here, before anything is printed.
  const bool declared_rounding = p.dtype == DType::f32 && spec.input && *spec.input != DType::f32;
  std::optional<AttentionInputs> rounded_otherwise;
  if (declared_rounding && *spec.input != kernel_dtype) rounded_otherwise = for_kernels(report.inputs, *spec.input);
  const AttentionInputs& seen_inputs =
      !declared_rounding ? report.inputs : rounded_otherwise ? *rounded_otherwise : inputs;
  std::unique_ptr<Implementation> captured;
  if (!seen.outputs.empty()) captured = make_captured_implementation(seen_inputs, seen, spec);
  if (!command.reports.html_stages.empty()) {
    std::vector<std::string> output_names;
    Problem kernel_problem = p;
    kernel_problem.dtype = kernel_dtype;
    for (const auto& impl : impls) {
      if (!impl->unsupported(kernel_problem)) add_output_names(impl->stage_graph(kernel_problem), output_names);
    }
    if (captured) add_output_names(captured->stage_graph(seen_inputs.problem), output_names);
    require_selections("--html-stages", command.reports.html_stages, output_names);
  }
  std::ostream& out = detail_stream(command.quiet);
  const bool colour = colour_stdout();

  out << "triage of " << command.report << ": " << p.shape.to_string() << " " << dtype_name(p.dtype) << ", mask "
      << p.mask.describe() << ", scale " << p.scale << "\n\n";
  out << "input findings (CPU, FP64, before any kernel):\n";
  const std::vector<InputFinding> findings = find_input_problems(report.inputs, kernel_dtype);
  for (const InputFinding& f : findings) out << "  " << f.cause << ": " << f.detail << "\n";
  if (findings.empty()) out << "  none\n";
  const bool defect = std::any_of(findings.begin(), findings.end(), [](const InputFinding& f) { return f.defect; });

  if (p.dtype == DType::f32) out << "the inputs are fp32; the kernels get them rounded to " << dtype_name(kernel_dtype) << "\n";
  if (!device.available) {
    out << "GPU kernels were not run: no CUDA device (" << device.why_unavailable
        << "); only the CPU implementations ran\n";
  }

  HtmlReportBuilder html = html_report(command.reports, "triage", command.command_line);
  html.add_summary(input_findings_table(findings));

  out << "\nimplementations, stage by stage:\n";
  std::unique_ptr<DeviceInputs> device_inputs;
  std::vector<CaseResult> results;
  Implementation* first_failing = nullptr;
  const auto report_one = [&](const CaseResult& r) {
    out << "  " << r.impl << ": " << painted_verdict(verdict_name(r.verdict), colour);
    if (!r.reason.empty()) out << " (" << r.reason << ")";
    out << "\n";
    if (r.divergence) write_pinpoint(out, *r.divergence);
  };
  // The output the user saw, when the report holds it: judged on the inputs as given (or as
  // --arithmetic says its kernel read them).
  if (!seen.outputs.empty()) {
    Judged judged = judge_case_keeping(*captured, seen_inputs, report.description, nullptr, html.enabled(), command.judge);
    html.add_case(seen_inputs, judged.run, judged.result, judged.references);
    results.push_back(std::move(judged.result));
    report_one(results.back());
  }
  for (auto& impl : impls) {
    if (impl->on_gpu() && !device_inputs) device_inputs = std::make_unique<DeviceInputs>(inputs, nullptr);
    Judged judged = judge_case_keeping(*impl, inputs, report.description, device_inputs.get(), html.enabled(), command.judge);
    html.add_case(inputs, judged.run, judged.result, judged.references);
    CaseResult& r = judged.result;
    report_one(r);
    if (r.divergence && !first_failing) first_failing = impl.get();
    results.push_back(std::move(r));
  }

  std::string minimized;  // for the summary line
  if (!command.minimize.empty()) {
    if (!first_failing) {
      // Minimizing reruns an implementation on ever smaller inputs: the report's own output
      // cannot be recomputed.
      const bool seen_diverged = !seen.outputs.empty() && !results.empty() && results.front().divergence;
      out << (seen_diverged ? "\nnothing to minimize: the report's output diverged, but no implementation run here did "
                              "(minimizing reruns one on smaller inputs)\n"
                            : "\nnothing to minimize: no implementation diverged on this report\n");
      minimized = "; nothing to minimize";
    } else {
      const Divergence target =
          *std::find_if(results.begin(), results.end(), [&](const CaseResult& r) { return r.impl == first_failing->name(); })->divergence;
      out << "\nminimizing for " << first_failing->name() << " (" << target.kind << ", " << target.cause << ")\n";
      Progress progress("minimize", 0);
      const std::optional<Minimized> m = minimize(*first_failing, inputs, target, &progress);
      progress.clear();
      if (!m) {
        out << "  the failure does not reproduce on its own head alone: not minimized\n";
        minimized = "; not minimized (the failure needs more than its own head)";
      } else {
        for (const std::string& step : m->steps) out << "  " << step << "\n";
        SnapshotOptions options;
        options.kind = "fixture";
        options.fault = first_failing->injected();
        write_snapshot(command.minimize, command.command_line, m->inputs, m->judged.run, m->judged.result,
                       m->judged.references, options);
        out << "  " << p.shape.to_string() << " -> " << m->inputs.problem.shape.to_string() << " in " << m->runs
            << " runs; still "
            << (m->judged.result.divergence ? m->judged.result.divergence->output + " " + m->judged.result.divergence->cause
                                            : std::string("passing"))
            << "\n  fixture: " << command.minimize << "\n";
        minimized = "; minimized to " + m->inputs.problem.shape.to_string() + " in " + command.minimize;
      }
    }
  }
  int counts[4] = {0, 0, 0, 0};
  for (const CaseResult& r : results) ++counts[static_cast<int>(r.verdict)];
  const std::size_t defects = static_cast<std::size_t>(
      std::count_if(findings.begin(), findings.end(), [](const InputFinding& f) { return f.defect; }));
  out << "\n";
  std::cout << "triage of " << command.report << ": " << findings.size() << " input finding"
            << (findings.size() == 1 ? "" : "s") << " (" << defects << " defect" << (defects == 1 ? "" : "s") << "); "
            << results.size()
            << " implementation" << (results.size() == 1 ? "" : "s") << ": " << counts[0] << " pass, " << counts[1]
            << " diverged, " << counts[2] << " error, " << counts[3] << " skipped" << minimized << "\n";
  write_report_files(command.reports, command.command_line, results, "triage", {}, findings);
  html.write();
  const bool diverged = std::any_of(results.begin(), results.end(), [](const CaseResult& r) { return r.verdict != Verdict::pass && r.verdict != Verdict::skipped; });
  if (diverged || defect) return kExitDiverged;
  // Nothing judged is not a pass (as --trace): the input findings alone cannot clear a report.
  if (counts[3] == static_cast<int>(results.size())) {
    return nothing_judged("every implementation skipped the report" +
                          (results.empty() ? std::string() : " (" + results.front().impl + ": " + results.front().reason + ")"));
  }
  return kExitPass;
}

}  // namespace fc

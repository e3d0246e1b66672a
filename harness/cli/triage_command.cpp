// flashcore-check triage REPORT [--impl ...] [--minimize OUT.h5]: a NaN bug report, from its
// inputs (CPU, before any kernel) to the first bad stage of each implementation, and down to
// the smallest case that still fails the same way.
#include <algorithm>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "harness/check/captured.h"
#include "harness/cli/commands.h"
#include "harness/io/case_loader.h"
#include "harness/io/snapshot.h"
#include "harness/triage/input_findings.h"
#include "harness/trace/judge.h"
#include "harness/triage/minimize.h"
#include "kernels/common/device_inputs.h"
#include "reference/attention.h"
#include "reports/table.h"
#include "stages/device_info.h"

namespace fc {
namespace {

// The named implementations (all when none is named); a named GPU one without a device is an error.
std::vector<std::unique_ptr<Implementation>> chosen(const std::vector<std::string>& names, bool gpu) {
  std::vector<std::unique_ptr<Implementation>> impls;
  for (auto& impl : select_implementations(names)) {
    if (impl->on_gpu() && !gpu) {
      if (!names.empty()) throw Error("--impl " + impl->name() + " needs a CUDA device");
      continue;
    }
    impls.push_back(std::move(impl));
  }
  return impls;
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
  const LoadedCase report = load_case(command.report);
  const Problem& p = report.inputs.problem;
  std::cout << "triage of " << command.report << ": " << p.shape.to_string() << " " << dtype_name(p.dtype) << ", mask "
            << p.mask.describe() << ", scale " << p.scale << "\n\n";

  const DType kernel_dtype = p.dtype == DType::f32 ? (command.dtype.empty() ? DType::f16 : *parse_dtype(command.dtype)) : p.dtype;
  std::cout << "input findings (CPU, FP64, before any kernel):\n";
  const std::vector<InputFinding> findings = find_input_problems(report.inputs, kernel_dtype);
  for (const InputFinding& f : findings) std::cout << "  " << f.cause << ": " << f.detail << "\n";
  if (findings.empty()) std::cout << "  none\n";
  const bool defect = std::any_of(findings.begin(), findings.end(), [](const InputFinding& f) { return f.defect; });

  const ReferenceTensors reference = compute_reference(report.inputs, {});
  std::cout << "\nreference (FP64): " << reference.masked_rows.size() << " fully masked rows, output "
            << (reference.output.numel() ? "computed" : "empty") << "\n";

  const AttentionInputs inputs = for_kernels(report.inputs, kernel_dtype);
  if (p.dtype == DType::f32) std::cout << "the inputs are fp32; the kernels get them rounded to " << dtype_name(kernel_dtype) << "\n";
  const DeviceInfo device = device_info();
  if (!device.available) {
    std::cout << "GPU kernels were not run: no CUDA device (" << device.why_unavailable
              << "); the CPU implementations were\n";
  }

  HtmlReportBuilder html = html_report(command.reports, "triage", command.command_line);
  html.add_summary(input_findings_table(findings));

  std::cout << "\nimplementations, stage by stage:\n";
  std::vector<std::unique_ptr<Implementation>> impls = chosen(command.impls, device.available);
  if (!command.inject.empty()) impls = with_fault(std::move(impls), command.inject);
  std::unique_ptr<DeviceInputs> device_inputs;
  std::vector<CaseResult> results;
  Implementation* first_failing = nullptr;
  const auto report_one = [&](const CaseResult& r) {
    std::cout << "  " << r.impl << ": " << verdict_name(r.verdict);
    if (!r.reason.empty()) std::cout << " (" << r.reason << ")";
    std::cout << "\n";
    if (r.divergence) write_pinpoint(std::cout, *r.divergence);
  };
  // The output the user saw, when the report holds it: judged on the inputs as given.
  const CaptureFile seen = read_capture_file(command.report);
  if (!seen.outputs.empty()) {
    std::unique_ptr<Implementation> captured = make_captured_implementation(report.inputs, seen, {});
    Judged judged = judge_case_keeping(*captured, report.inputs, report.description, nullptr, html.enabled(), command.judge);
    html.add_case(report.inputs, judged.run, judged.result, judged.references);
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

  if (!command.minimize.empty()) {
    if (!first_failing) {
      std::cout << "\nnothing to minimize: no implementation diverged on this report\n";
    } else {
      const Divergence target =
          *std::find_if(results.begin(), results.end(), [&](const CaseResult& r) { return r.impl == first_failing->name(); })->divergence;
      std::cout << "\nminimizing for " << first_failing->name() << " (" << target.kind << ", " << target.cause << ")\n";
      const std::optional<Minimized> m = minimize(*first_failing, inputs, target);
      if (!m) {
        std::cout << "  the failure does not reproduce on its own head alone: not minimized\n";
      } else {
        for (const std::string& step : m->steps) std::cout << "  " << step << "\n";
        SnapshotOptions options;
        options.kind = "fixture";
        options.fault = first_failing->injected();
        write_snapshot(command.minimize, command.command_line, m->inputs, m->judged.run, m->judged.result,
                       m->judged.references, options);
        std::cout << "  " << p.shape.to_string() << " -> " << m->inputs.problem.shape.to_string() << " in " << m->runs
                  << " runs; still " << (m->judged.result.divergence ? m->judged.result.divergence->output + " " +
                                                                          m->judged.result.divergence->cause
                                                                    : std::string("passing"))
                  << "\n  fixture: " << command.minimize << "\n";
      }
    }
  }
  write_report_files(command.reports, command.command_line, results, "triage", {}, findings);
  html.write();
  const bool diverged = std::any_of(results.begin(), results.end(), [](const CaseResult& r) { return r.verdict != Verdict::pass && r.verdict != Verdict::skipped; });
  return diverged || defect ? kExitDiverged : kExitPass;
}

}  // namespace fc

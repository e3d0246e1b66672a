// flashcore-check --trace: every implementation on every planned case, stage by stage.
#include <algorithm>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/io/snapshot.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"
#include "reference/self_check.h"
#include "reports/descriptors.h"
#include "reports/table.h"
#include "stages/device_info.h"

namespace fc {
namespace {

// "out.h" -> "out.naive.3.h5": one file per judged case when a run judges several.
std::string numbered_path(const std::string& path, const std::string& impl, int case_number) {
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  const std::string stem = dot != std::string::npos && (slash == std::string::npos || dot > slash) ? path.substr(0, dot) : path;
  return stem + "." + impl + "." + std::to_string(case_number) + ".h5";
}

void print_self_check(const SelfCheck& c) {
  std::cout << "reference self-check: blocked vs full " << c.blocked_deviation << ", split-KV vs full "
            << c.split_deviation << ", row sums " << c.row_sum_deviation << " (allowed " << kSelfCheckTolerance
            << "), " << c.masked_rows << " fully masked rows: " << (c.passed() ? "pass" : "FAIL") << "\n";
}

}  // namespace

int run_trace(const TraceCommand& command) {
  const DeviceInfo device = device_info();
  std::vector<std::unique_ptr<Implementation>> impls = select_implementations(command.impls);
  if (!command.inject.empty()) impls = with_fault(std::move(impls), command.inject);
  if (!device.available) {
    for (const auto& impl : impls) {
      if (impl->on_gpu() && !command.impls.empty()) {
        throw Error("--impl " + impl->name() + " needs a CUDA device: " + device.why_unavailable);
      }
    }
    std::cout << "no CUDA device (" << device.why_unavailable
              << "): GPU implementations not run; running the CPU implementations and the reference self-check\n\n";
    std::vector<std::unique_ptr<Implementation>> cpu;
    for (auto& impl : impls) {
      if (!impl->on_gpu()) cpu.push_back(std::move(impl));
    }
    impls = std::move(cpu);
    if (impls.empty()) {
      throw Error("--inject " + command.inject + ": only GPU implementations have this fault, and there is no CUDA device");
    }
  }

  const std::vector<CaseSpec> cases = plan_cases(command.plan);
  HtmlReportBuilder html = html_report(command.reports, "trace", command.command_line);
  const bool several = cases.size() * impls.size() > 1;
  std::vector<CaseResult> results;
  bool self_check_failed = false;
  int case_number = 0;
  for (const CaseSpec& spec : cases) {
    ++case_number;
    const AttentionInputs inputs = generate_inputs(spec);
    if (!device.available) {
      std::cout << spec.label() << "\n";
      const SelfCheck check = reference_self_check(inputs);
      print_self_check(check);
      self_check_failed = self_check_failed || !check.passed();
    }
    const CaseDescription description = describe_case(inputs, spec.label(), spec.mask, spec.dist, spec.seed);
    std::unique_ptr<DeviceInputs> device_inputs;
    for (const auto& impl : impls) {
      if (impl->on_gpu() && !device_inputs) device_inputs = std::make_unique<DeviceInputs>(inputs, nullptr);
      const bool snapshot = !command.snapshot.empty();
      const Judged judged = judge_case_keeping(*impl, inputs, description, device_inputs.get(),
                                               snapshot || html.enabled(), command.judge);
      results.push_back(judged.result);
      html.add_case(inputs, judged.run, judged.result, judged.references);
      write_case_table(std::cout, judged.result);
      if (command.dump_descriptors && !judged.result.descriptors.empty()) {
        write_descriptors(std::cout, &judged.run.graph, judged.result.descriptors);
        std::cout << "\n";
      }
      if (snapshot && judged.result.verdict != Verdict::skipped) {
        const std::string path = several ? numbered_path(command.snapshot, impl->name(), case_number) : command.snapshot;
        SnapshotOptions options;
        options.kind = command.fixture ? "fixture" : "snapshot";
        options.fault = impl->injected();
        options.stages = command.snapshot_stages;
        options.final_reference_only = command.fixture;
        write_snapshot(path, command.command_line, inputs, judged.run, judged.result, judged.references, options);
        std::cout << "  snapshot: " << path << "\n\n";
      }
    }
    if (impls.empty()) std::cout << "\n";
  }

  int counts[4] = {0, 0, 0, 0};
  for (const CaseResult& r : results) ++counts[static_cast<int>(r.verdict)];
  std::cout << cases.size() << " cases x " << impls.size() << " implementations: " << counts[0] << " pass, "
            << counts[1] << " diverged, " << counts[2] << " error, " << counts[3] << " skipped";
  if (!device.available) std::cout << "; reference self-check " << (self_check_failed ? "FAILED" : "passed");
  std::cout << "\n";
  write_report_files(command.reports, command.command_line, results, "trace");
  html.write();
  return counts[1] + counts[2] > 0 || self_check_failed ? kExitDiverged : kExitPass;
}

}  // namespace fc

// flashcore-check --trace: every implementation on every planned case, stage by stage.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/io/snapshot.h"
#include "harness/inputs.h"
#include "harness/io/staged_file.h"
#include "harness/trace/judge.h"
#include "harness/trace/row_sample.h"
#include "kernels/common/device_inputs.h"
#include "reference/self_check.h"
#include "reports/descriptors.h"
#include "reports/progress.h"
#include "reports/table.h"
#include "reports/terminal.h"
#include "stages/device_info.h"

namespace fc {
namespace {

void print_self_check(std::ostream& out, const SelfCheck& c) {
  out << "reference self-check: blocked vs full " << c.blocked_deviation << ", split-KV vs full " << c.split_deviation
      << ", row sums " << c.row_sum_deviation << " (allowed " << kSelfCheckTolerance << "), " << c.masked_rows
      << " fully masked rows: " << (c.passed() ? "pass" : "FAIL") << "\n";
}

std::string counted(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// --snapshot: a FILE holds one case, the first that diverged (else the first judged), so
// that `replay FILE` replays the bug; an existing folder gets every judged case as
// IMPL.N.h5. Checked before any work.
class Snapshots {
 public:
  Snapshots(const TraceCommand& command, std::size_t cases, std::size_t runs)
      : command_(command), cases_(cases), runs_(runs) {
    if (command.snapshot.empty()) return;
    std::error_code ec;
    folder_ = std::filesystem::is_directory(command.snapshot, ec);
    check_output_path(folder_ ? path_in_folder("check", 0) : command.snapshot);
  }

  bool wanted() const { return !command_.snapshot.empty(); }

  // After each judged case: written now, kept for later, or passed over.
  void offer(Judged judged, const AttentionInputs& inputs, const Implementation& impl, int case_number,
             std::ostream& out) {
    if (!wanted() || judged.result.verdict == Verdict::skipped || done_) return;
    if (folder_) {
      write(path_in_folder(impl.name(), case_number), judged, inputs, impl.injected(), out, "");
      return;
    }
    const bool diverged = judged.result.verdict == Verdict::diverged;
    if (diverged) {
      write(command_.snapshot, judged, inputs, impl.injected(), out, why(case_number, "the first that diverged"));
      done_ = true;
      first_.reset();
    } else if (!first_) {
      first_ = Kept{std::move(judged), inputs, impl.injected(), case_number};
    }
  }

  // When no case diverged: the first judged one.
  void finish(std::ostream& out) {
    if (done_ || folder_ || !first_) return;
    write(command_.snapshot, first_->judged, first_->inputs, first_->fault, out,
          why(first_->case_number, "none diverged, so the first"));
  }

 private:
  struct Kept {
    Judged judged;
    AttentionInputs inputs;
    std::string fault;
    int case_number = 0;
  };

  std::string path_in_folder(const std::string& impl, int case_number) const {
    return (std::filesystem::path(command_.snapshot) / (impl + "." + std::to_string(case_number) + ".h5")).string();
  }

  std::string why(int case_number, const std::string& which) const {
    if (runs_ <= 1) return "";
    return " (case " + std::to_string(case_number) + " of " + std::to_string(cases_) + ", " + which +
           "; --snapshot DIR writes every case)";
  }

  void write(const std::string& path, const Judged& judged, const AttentionInputs& inputs, const std::string& fault,
             std::ostream& out, const std::string& note) const {
    SnapshotOptions options;
    options.kind = command_.fixture ? "fixture" : "snapshot";
    options.fault = fault;
    options.stages = command_.snapshot_stages;
    options.final_reference_only = command_.fixture;
    write_snapshot(path, command_.command_line, inputs, judged.run, judged.result, judged.references, options);
    out << "  snapshot: " << path << " holds " << judged.result.impl << " on " << judged.result.description.label
        << note << "\n\n";
  }

  const TraceCommand& command_;
  std::size_t cases_, runs_;
  bool folder_ = false, done_ = false;
  std::optional<Kept> first_;
};

}  // namespace

int run_trace(const TraceCommand& command) {
  // Everything that can be refused is refused before any work and before any banner.
  const std::vector<CaseSpec> cases = plan_cases(command.plan);
  std::vector<std::unique_ptr<Implementation>> impls = select_implementations(command.impls);
  if (!command.inject.empty()) impls = with_fault(std::move(impls), command.inject);
  check_report_files(command.reports);
  const DeviceInfo device = device_info();
  if (!device.available) {
    for (const auto& impl : impls) {
      if (impl->on_gpu() && !command.impls.empty()) {
        throw Error("--impl " + impl->name() + " needs a CUDA device: " + device.why_unavailable);
      }
    }
    std::vector<std::unique_ptr<Implementation>> cpu;
    for (auto& impl : impls) {
      if (!impl->on_gpu()) cpu.push_back(std::move(impl));
    }
    impls = std::move(cpu);
    if (impls.empty()) {
      throw Error("--inject " + command.inject + ": only GPU implementations have this fault, and there is no CUDA device");
    }
  }
  // Each case's problem and rows, and names of stage outputs that select something, before the
  // banner. A name selects outputs of some implementations only (their graphs differ), of those
  // that run the case.
  std::vector<std::string> output_names;
  for (const CaseSpec& spec : cases) {
    const Problem problem = make_problem(spec);
    check_rows(command.judge.rows, spec.shape.q_len);
    for (const auto& impl : impls) {
      if (!impl->unsupported(problem)) add_output_names(impl->stage_graph(problem), output_names);
    }
  }
  require_selections("--snapshot-stages", command.snapshot_stages, output_names);
  require_selections("--html-stages", command.reports.html_stages, output_names);
  Snapshots snapshots(command, cases.size(), cases.size() * impls.size());
  if (!device.available && command.impls.empty()) {  // (implementations named: all of them run)
    std::cerr << "no CUDA device (" << device.why_unavailable
              << "): GPU implementations not run; running the CPU implementations and the reference self-check\n";
  }

  std::ostream& out = detail_stream(command.quiet);
  const bool colour = colour_stdout();
  Progress progress("trace", static_cast<std::int64_t>(cases.size() * std::max<std::size_t>(impls.size(), 1)));
  HtmlReportBuilder html = html_report(command.reports, "trace", command.command_line);
  std::vector<CaseResult> results;
  bool self_check_failed = false;
  int case_number = 0;
  for (const CaseSpec& spec : cases) {
    ++case_number;
    const AttentionInputs inputs = generate_inputs(spec);
    if (!device.available) {
      const SelfCheck check = reference_self_check(inputs);
      progress.clear();
      out << spec.label() << "\n";
      print_self_check(out, check);
      self_check_failed = self_check_failed || !check.passed();
    }
    const CaseDescription description = describe_case(inputs, spec.label(), spec.mask, spec.dist, spec.seed);
    std::unique_ptr<DeviceInputs> device_inputs;
    for (const auto& impl : impls) {
      if (impl->on_gpu() && !device_inputs) device_inputs = std::make_unique<DeviceInputs>(inputs, nullptr);
      Judged judged = judge_case_keeping(*impl, inputs, description, device_inputs.get(),
                                         snapshots.wanted() || html.enabled(), command.judge);
      results.push_back(judged.result);
      html.add_case(inputs, judged.run, judged.result, judged.references);
      progress.clear();
      write_case_table(out, judged.result, colour);
      if (command.dump_descriptors && !judged.result.descriptors.empty()) {
        write_descriptors(out, &judged.run.graph, judged.result.descriptors);
        out << "\n";
      }
      snapshots.offer(std::move(judged), inputs, *impl, case_number, out);
      progress.advance();
    }
    if (impls.empty()) {
      out << "\n";
      progress.advance();
    }
  }
  progress.clear();
  snapshots.finish(out);

  int counts[4] = {0, 0, 0, 0};
  for (const CaseResult& r : results) ++counts[static_cast<int>(r.verdict)];
  std::cout << counted(cases.size(), "case", "cases") << " x " << counted(impls.size(), "implementation", "implementations")
            << ": " << counts[0] << " pass, " << counts[1] << " diverged, " << counts[2] << " error, " << counts[3]
            << " skipped";
  if (!device.available) std::cout << "; reference self-check " << (self_check_failed ? "FAILED" : "passed");
  std::cout << "\n";
  write_report_files(command.reports, command.command_line, results, "trace");
  html.write();
  if (counts[1] + counts[2] > 0 || self_check_failed) return kExitDiverged;
  // Nothing judged is not a pass: a CI job whose every case was declined must not go green.
  if (!results.empty() && counts[3] == static_cast<int>(results.size())) {
    return nothing_judged("every case was skipped (" +
                          (command.quiet ? results.front().impl + ": " + results.front().reason : "the reasons are above") +
                          ")");
  }
  return kExitPass;
}

}  // namespace fc

// flashcore-check sensitivity: detection power. Each implementation runs clean on seeded
// cases at several key lengths (a divergence there is a false alarm); then small realistic
// bugs are planted into its captured stage outputs and judged (harness/sensitivity/).
#include <cmath>
#include <iostream>
#include <map>
#include <set>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/cli/report_files.h"
#include "harness/io/staged_file.h"
#include "harness/io/text_output.h"
#include "harness/sensitivity/sensitivity_report.h"
#include "reports/progress.h"
#include "stages/device_info.h"

namespace fc {
namespace {

// One chart per implementation and dtype: the detection rate of each perturbation (over the
// stages it was planted in) against Sk, as the README's table summarizes it.
std::vector<HtmlChart> detection_charts(const SensitivityResult& r, const std::vector<std::int64_t>& kv_lens) {
  std::map<std::pair<std::string, DType>, std::map<std::string, std::map<std::int64_t, std::pair<int, int>>>> rates;
  for (const SensitivityCell& c : r.cells) {
    if (c.perturbation == "element-scale") continue;  // a scan of deltas, not a rate
    auto& at = rates[{c.impl, c.dtype}][c.perturbation][c.kv_len];
    at.first += c.detected;
    at.second += c.trials;
  }
  std::vector<HtmlChart> charts;
  for (const auto& [key, perturbations] : rates) {
    HtmlChart chart;
    chart.id = "sensitivity-" + key.first + "-" + dtype_name(key.second);
    chart.title = key.first + " " + dtype_name(key.second) + ": detection rate against Sk";
    chart.caption = "planted perturbations caught, over every stage kind they were planted in";
    chart.x_label = "Sk";
    chart.y_label = "detection rate";
    chart.log_x = true;
    for (std::int64_t k : kv_lens) chart.x.push_back(static_cast<double>(k));
    for (const auto& [name, by_sk] : perturbations) {
      HtmlSeries series{name, {}};
      for (std::int64_t k : kv_lens) {
        const auto it = by_sk.find(k);
        series.y.push_back(it == by_sk.end() || it->second.second == 0
                               ? std::nan("")
                               : static_cast<double>(it->second.first) / it->second.second);
      }
      chart.series.push_back(std::move(series));
    }
    charts.push_back(std::move(chart));
  }
  return charts;
}

}  // namespace

int run_sensitivity(const SensitivityCommand& command) {
  SensitivityOptions options;
  if (!command.kv_lens.empty()) options.kv_lens = command.kv_lens;
  for (std::int64_t k : options.kv_lens) {
    if (k < 1) throw Error("--sk " + std::to_string(k) + ": a key length must be at least 1");
  }
  if (!command.dtypes.empty()) {
    options.dtypes.clear();
    for (const std::string& d : command.dtypes) {
      const std::optional<DType> t = parse_dtype(d);
      if (!t || (*t != DType::f16 && *t != DType::bf16)) throw Error("--dtype '" + d + "': fp16 or bf16");
      options.dtypes.push_back(*t);
    }
  }
  options.seeds = command.seeds;
  options.q_len = command.rows;
  options.judged_by = command.judge.judged_by;

  if (!command.reports.json.empty()) check_output_path(command.reports.json);
  if (!command.reports.html.empty()) check_output_path(command.reports.html);
  const DeviceInfo device = device_info();
  std::vector<std::unique_ptr<Implementation>> impls = select_implementations(command.impls);
  std::vector<std::unique_ptr<Implementation>> runnable;
  for (auto& impl : impls) {
    if (!impl->on_gpu() || device.available) {
      runnable.push_back(std::move(impl));
    } else if (!command.impls.empty()) {
      throw Error("--impl " + impl->name() + " needs a CUDA device: " + device.why_unavailable);
    }
  }
  if (!device.available && command.impls.empty()) {
    std::cerr << "no CUDA device (" << device.why_unavailable << "): measuring the CPU implementations\n";
  }

  SensitivityResult all;
  // The clean runs, each implementation's counted by measure_sensitivity as (done, total).
  Progress progress("sensitivity", 0);
  for (auto& impl : runnable) {
    int seen = 0;
    bool counted = false;
    const auto advance = [&](int done, int total) {
      if (!counted) progress.add_total(total);
      counted = true;
      progress.advance(done - seen);
      seen = done;
    };
    SensitivityResult r = measure_sensitivity(*impl, options, advance);
    all.cells.insert(all.cells.end(), r.cells.begin(), r.cells.end());
    all.clean_runs += r.clean_runs;
    all.false_alarms.insert(all.false_alarms.end(), r.false_alarms.begin(), r.false_alarms.end());
    all.skipped.insert(all.skipped.end(), r.skipped.begin(), r.skipped.end());
  }
  progress.clear();
  std::cout << "sensitivity: B1 H1 Sq" << options.q_len << " D" << options.head_dim << ", causal-br, normal inputs, "
            << options.seeds << " seeds a cell; bugs planted into the captured outputs of the first stage of each "
            << "kind they change, judged by the " << (options.judged_by == BoundChoice::tight ? "tight" : "worst-case")
            << " bound\n\n";
  write_sensitivity_table(std::cout, all);
  if (!command.reports.json.empty()) {
    write_text_file(command.reports.json,
                    [&](std::ostream& out) { write_sensitivity_json(out, command.command_line, all); });
  }
  if (!command.reports.html.empty()) {
    HtmlReportBuilder html = html_report(command.reports, "sensitivity", command.command_line);
    for (HtmlChart& chart : detection_charts(all, options.kv_lens)) html.add_summary(std::move(chart));
    for (const CaseResult& r : all.false_alarms) html.add_result(r, "a false alarm: a clean run that did not pass");
    html.write();
  }
  if (!all.false_alarms.empty()) return kExitDiverged;
  if (all.clean_runs == 0) {  // every key length skipped: nothing measured is not a measurement
    return nothing_judged("every case was skipped" + (all.skipped.empty() ? std::string() : " (" + all.skipped.front() + ")"));
  }
  return kExitPass;
}

}  // namespace fc

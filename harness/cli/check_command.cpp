// flashcore-check check INPUTS [OUTPUT] | FILE|DIR ...: the outputs of anyone's attention
// kernel, captured to a file, judged against the FP64 reference under the bounds of the
// arithmetic it declares: the same table, pinpoint, cause, JSON and JUnit as --trace.
// Several captures are judged in parallel (one per core), a single one parallel over heads.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "core/error.h"
#include "core/parallel.h"
#include "harness/check/captured.h"
#include "harness/cli/commands.h"
#include "harness/trace/judge.h"
#include "reports/table.h"
#include "reports/terminal.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

// A file of inputs (and perhaps outputs) and the outputs-only file that follows it, if any.
struct Unit {
  std::string inputs, outputs;
};

std::vector<std::string> expand(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    if (!fs::is_directory(path)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (const fs::directory_entry& e : fs::directory_iterator(path)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".npz" || ext == ".h5")) found.push_back(e.path().string());
    }
    if (found.empty()) throw file_error(path, "no captures (*.npz, *.h5) in this folder");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::vector<Unit> pair_files(const std::vector<std::string>& files) {
  std::vector<Unit> units;
  for (const std::string& f : files) {
    if (capture_holds_inputs(f)) {
      units.push_back({f, ""});
    } else if (units.empty() || !units.back().outputs.empty()) {
      throw file_error(f, "missing array 'q': a file of outputs alone must follow the inputs file it belongs to");
    } else {
      units.back().outputs = f;
    }
  }
  return units;
}

CaptureFile load(const Unit& unit) {
  CaptureFile capture = read_capture_file(unit.inputs);
  if (unit.outputs.empty()) return capture;
  CaptureFile outputs = read_capture_file(unit.outputs);
  for (auto& [name, tensor] : outputs.outputs) {
    if (capture.outputs.count(name)) {
      throw file_error(unit.outputs, "'" + name + "' is also in " + unit.inputs + ": which one was the kernel's?");
    }
    capture.outputs[name] = std::move(tensor);
  }
  if (!outputs.impl.empty()) capture.impl = outputs.impl;
  if (outputs.tile_width > 0) capture.tile_width = outputs.tile_width;
  capture.path = unit.outputs;
  return capture;
}

}  // namespace

int run_check(const CheckCommand& command) {
  const ArithmeticSpec spec = command.arithmetic.empty() ? ArithmeticSpec{} : parse_arithmetic(command.arithmetic);
  const std::vector<Unit> units = pair_files(expand(command.paths));
  check_report_files(command.reports);
  if (!command.reports.html_stages.empty()) {
    throw Error("--html-stages: check's HTML report draws no heatmaps (the captures' runs are not kept)");
  }
  std::vector<CaseResult> results(units.size());
  std::mutex reading;  // HDF5 is not thread-safe: one file read at a time
  std::atomic<bool> failed{false};
  const auto judge = [&](std::int64_t i) {
    if (failed) return;  // a bad file ends the command: skip what is left
    try {
      std::unique_lock<std::mutex> lock(reading);
      const CaptureFile capture = load(units[static_cast<std::size_t>(i)]);
      lock.unlock();
      const AttentionInputs& inputs = capture.inputs->inputs;
      std::unique_ptr<Implementation> impl = make_captured_implementation(inputs, capture, spec);
      results[static_cast<std::size_t>(i)] = judge_case(*impl, inputs, capture.inputs->description, nullptr);
    } catch (...) {
      failed = true;
      throw;
    }
  };
  if (units.size() == 1) {
    judge(0);  // the reference runs parallel over heads
  } else {
    omp_set_max_active_levels(1);  // parallel over captures; each one's heads serial
    parallel_for(static_cast<std::int64_t>(units.size()), judge);
  }

  int counts[4] = {0, 0, 0, 0};
  std::ostream& out = detail_stream(command.quiet);
  const bool colour = colour_stdout();
  for (const CaseResult& r : results) {
    write_case_table(out, r, colour);
    ++counts[static_cast<int>(r.verdict)];
  }
  std::cout << units.size() << (units.size() == 1 ? " capture: " : " captures: ") << counts[0] << " pass, " << counts[1]
            << " diverged, " << counts[2] << " error\n";
  write_report_files(command.reports, command.command_line, results, "check");
  // The captures' runs are not kept (a capture can be large): each case's table and pinpoint.
  HtmlReportBuilder html = html_report(command.reports, "check", command.command_line);
  for (std::size_t i = 0; i < results.size(); ++i) {
    html.add_result(results[i], units[i].outputs.empty() ? "" : "outputs from " + units[i].outputs);
  }
  html.write();
  return counts[1] + counts[2] > 0 ? kExitDiverged : kExitPass;
}

}  // namespace fc

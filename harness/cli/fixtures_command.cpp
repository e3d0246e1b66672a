// flashcore-check fixtures [DIR]: every regression fixture in DIR, checked.
//   everywhere: the file reads (integrity), its stored references equal the FP64 reference
//     recomputed now (to 1e-12), and replaying its captured run gives the recorded verdict
//     and first divergence (stage output, cause, element);
//   with a GPU: every implementation runs live on the fixture's inputs; the captured one
//     (with the fixture's fault, if any) must diverge the same way, the others as a clean
//     implementation must (pass, or the recorded cause when the inputs themselves are bad).
// DIR/MANIFEST lists the fixtures and what each records; it must agree with the files.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/io/snapshot.h"
#include "harness/io/staged_file.h"
#include "harness/io/text_output.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"
#include "reports/progress.h"
#include "reports/table.h"
#include "reports/terminal.h"
#include "stages/device_info.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

struct ManifestLine {
  std::string file, impl, fault, verdict, output, cause;
};

std::string dash(const std::string& s) { return s.empty() ? "-" : s; }

ManifestLine manifest_line(const std::string& file, const Snapshot& s) {
  const std::optional<Divergence>& d = s.recorded.divergence;
  return {file, s.impl, dash(s.fault), verdict_name(s.recorded.verdict), d ? d->output : "-", d ? d->cause : "-"};
}

std::string format(const ManifestLine& m) {
  return m.file + " " + m.impl + " " + m.fault + " " + m.verdict + " " + m.output + " " + m.cause;
}

std::vector<std::string> fixture_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".h5") files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::map<std::string, std::string> read_manifest(const std::string& path) {
  std::map<std::string, std::string> lines;
  std::error_code ec;
  if (!fs::exists(path, ec)) return lines;  // every fixture is then "not in MANIFEST"
  if (!fs::is_regular_file(path, ec)) throw file_error(path, "not a file");
  std::ifstream in(path);
  if (!in) throw file_error(path, "cannot read");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    lines[line.substr(0, line.find(' '))] = line;
  }
  return lines;
}

// Largest relative difference between a stored reference and the one computed now.
double reference_drift(const Snapshot& s, const std::vector<OutputReferences>& now, const H5Reader& in) {
  double drift = 0;
  for (std::size_t i = 0; i < s.run.captured.size(); ++i) {
    const std::string name = s.run.graph.stages[s.run.captured[i].stage].output_name(s.run.captured[i].output);
    const std::string object = "/stages/" + name + "/reference";
    if (now[i].end_to_end.empty() || !in.exists(object)) continue;
    const HostTensor stored = in.read_tensor(object);
    if (stored.dims() != now[i].end_to_end.dims()) throw file_error(in.path(), object + ": shape differs from the stage's");
    double scale = 1;
    for (std::int64_t e = 0; e < stored.numel(); ++e) {
      if (std::isfinite(stored.get(e))) scale = std::max(scale, std::fabs(stored.get(e)));
    }
    for (std::int64_t e = 0; e < stored.numel(); ++e) {
      const double x = stored.get(e), y = now[i].end_to_end.get(e);
      if (x == y) continue;
      drift = std::max(drift, std::isfinite(x) && std::isfinite(y) ? std::fabs(x - y) / scale : INFINITY);
    }
  }
  return drift;
}


// Every check of every fixture, for the reports; the current fixture's, for its line.
struct Tally {
  std::vector<JunitCase> junit;
  std::vector<CaseResult> results;
  int failed = 0;
  std::vector<std::string> fixture_failures;  // "FAIL  CHECK: MESSAGE" of the current fixture
  int fixture_live = 0;                       // of its checks, the live runs
  int fixture_checks = 0;

  void add(const std::string& fixture, const std::string& check, bool ok, const std::string& message,
           const CaseResult* result) {
    JunitCase c;
    c.classname = "flashcore-check.fixtures." + fixture;
    c.name = check;
    c.status = ok ? JunitCase::Status::passed : JunitCase::Status::failed;
    c.message = message;
    if (result) {
      std::ostringstream details;
      write_case_table(details, *result);
      c.details = details.str();
      c.seconds = result->seconds;
      results.push_back(*result);
    }
    junit.push_back(c);
    failed += ok ? 0 : 1;
    ++fixture_checks;
    if (!ok) fixture_failures.push_back(check + ": " + message);
    if (check.rfind("live ", 0) == 0) ++fixture_live;
  }

  // One line per fixture, and under it each check that failed.
  void end_fixture(std::ostream& out, const std::string& heading, bool colour) {
    out << heading << ": " << fixture_checks << " checks "
        << (fixture_failures.empty() ? painted_verdict("ok", colour)
                                     : painted(std::to_string(fixture_failures.size()) + " FAILED", Tone::bad, colour))
        << " (" << fixture_live << " live run" << (fixture_live == 1 ? "" : "s") << ")\n";
    for (const std::string& f : fixture_failures) out << "  " << painted("FAIL", Tone::bad, colour) << "  " << f << "\n";
    fixture_failures.clear();
    fixture_live = 0;
    fixture_checks = 0;
  }
};

// Every stage output an HTML report of these fixtures could draw: each fixture's captured run,
// and the implementations that run live on its inputs here.
std::vector<std::string> output_names(const std::string& dir, const std::vector<std::string>& files, bool gpu) {
  std::vector<std::string> names;
  for (const std::string& file : files) {
    const Snapshot s = read_snapshot(H5Reader((fs::path(dir) / file).string()));
    add_output_names(s.run.graph, names);
    for (auto& impl : make_implementations()) {
      if ((impl->on_gpu() && !gpu) || impl->unsupported(s.file.inputs.problem)) continue;
      add_output_names(impl->stage_graph(s.file.inputs.problem), names);
    }
  }
  return names;
}

}  // namespace

int run_fixtures(const FixturesCommand& command) {
  const std::vector<std::string> files = fixture_files(command.dir);
  if (files.empty()) throw file_error(command.dir, "no fixtures (*.h5)");
  const std::string manifest_path = (fs::path(command.dir) / "MANIFEST").string();
  // The files it reads, before the outputs are checked against them.
  for (const std::string& file : files) note_input_file((fs::path(command.dir) / file).string());
  const std::map<std::string, std::string> manifest =
      command.write_manifest ? std::map<std::string, std::string>{} : read_manifest(manifest_path);
  if (!command.write_manifest) note_input_file(manifest_path);
  check_report_files(command.reports);
  if (command.write_manifest) check_output_path(manifest_path);
  const DeviceInfo device = device_info();
  if (!command.reports.html_stages.empty()) {
    require_selections("--html-stages", command.reports.html_stages, output_names(command.dir, files, device.available));
  }
  std::ostream& out = detail_stream(command.quiet);
  const bool colour = colour_stdout();
  Progress progress("fixtures", static_cast<std::int64_t>(files.size()));
  std::vector<std::string> new_manifest{"# file impl fault verdict first-divergence cause (flashcore-check fixtures --write-manifest)"};
  Tally tally;
  HtmlReportBuilder html = html_report(command.reports, "fixtures", command.command_line);
  for (const std::string& file : files) {
    const std::string path = (fs::path(command.dir) / file).string();
    const H5Reader reader(path);
    Snapshot s = read_snapshot(reader);
    if (s.file.kind != "fixture") throw file_error(path, "kind is '" + s.file.kind + "', not a fixture");
    const std::string heading =
        file + ": " + s.impl + (s.fault.empty() ? "" : " with " + s.fault) + ", " + s.file.description.label;
    const ManifestLine line = manifest_line(file, s);
    new_manifest.push_back(format(line));
    if (!command.write_manifest) {
      const auto listed = manifest.find(file);
      const bool agrees = listed != manifest.end() && listed->second == format(line);
      tally.add(file, "manifest", agrees,
                agrees ? "listed" : listed == manifest.end() ? "not in MANIFEST" : "MANIFEST says: " + listed->second,
                nullptr);
    }

    std::vector<OutputReferences> references;
    const CaseResult replay =
        judged_from_file(path, [&] { return judge_run(s.impl, s.file.inputs, s.file.description, s.run, &references); });
    const double drift = reference_drift(s, references, reader);
    std::ostringstream drift_text;
    drift_text << "stored references within " << drift << " of the recomputed ones (1e-12 allowed)";
    tally.add(file, "reference", drift <= 1e-12, drift_text.str(), nullptr);
    const bool replay_ok = replay.verdict == s.recorded.verdict && same_divergence(replay.divergence, s.recorded.divergence, true);
    tally.add(file, "replay", replay_ok, "replayed " + outcome_text(replay) + "; recorded " + outcome_text(s.recorded), &replay);
    html.add_case(s.file.inputs, s.run, replay, references,
                  file + ": replay " + (replay_ok ? "agrees with" : "DIFFERS from") + " the recorded " + outcome_text(s.recorded));

    // Live: every implementation on the fixture's inputs, the GPU ones where a device is.
    const bool input_defect = s.recorded.divergence && (s.recorded.divergence->cause == "input-nan" ||
                                                        s.recorded.divergence->cause == "input-inf");
    std::unique_ptr<DeviceInputs> device_inputs;
    if (device.available) device_inputs = std::make_unique<DeviceInputs>(s.file.inputs, nullptr);
    for (auto& impl : make_implementations()) {
      if ((impl->on_gpu() && !device.available) || impl->unsupported(s.file.inputs.problem)) continue;
      const bool captured = impl->name() == s.impl;
      if (captured) impl->inject(s.fault);
      const Judged judged = judge_case_keeping(*impl, s.file.inputs, s.file.description, device_inputs.get(), html.enabled());
      const CaseResult& live = judged.result;
      bool ok;
      if (captured || input_defect) {
        // The same stage output and cause (a race may move the element, so not the index).
        ok = live.verdict == s.recorded.verdict && same_divergence(live.divergence, s.recorded.divergence, false);
      } else {
        ok = live.verdict == Verdict::pass;
      }
      const std::string check = "live " + impl->name() + (captured && !s.fault.empty() ? " with " + s.fault : "");
      tally.add(file, check, ok, outcome_text(live), &live);
      html.add_case(s.file.inputs, judged.run, live, judged.references, file + ": " + check + (ok ? " (as expected)" : " (NOT as expected)"));
    }
    progress.clear();
    tally.end_fixture(out, heading, colour);
    progress.advance();
  }
  progress.clear();
  if (command.write_manifest) {
    write_text_file(manifest_path, [&](std::ostream& out) {
      for (const std::string& l : new_manifest) out << l << "\n";
    });
    out << "wrote " << manifest_path << "\n";
  }
  std::cout << files.size() << " fixtures, " << tally.junit.size() << " checks, "
            << painted(std::to_string(tally.failed) + " failed", tally.failed ? Tone::bad : Tone::good, colour)
            << (device.available ? "" : " (no CUDA device: GPU implementations not run live)") << "\n";
  write_report_files(command.reports, command.command_line, tally.results, "fixtures", tally.junit);
  html.write();
  return tally.failed > 0 ? kExitDiverged : kExitPass;
}

}  // namespace fc

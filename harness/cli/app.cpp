#include "harness/cli/app.h"

#include <algorithm>
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/watchdog.h"
#include "harness/io/staged_file.h"
#include "harness/check/arithmetic_spec.h"
#include "harness/cli/commands.h"
#include "harness/sanitize/sanitized_trace.h"
#include "harness/inputs.h"
#include "harness/plugin/crash_guard.h"
#include "harness/plugin/plugins.h"

namespace fc {
namespace {

constexpr std::size_t kHelpWidth = 100;  // no line of --help is longer
constexpr std::size_t kHelpNameColumn = 30;

// `text` broken at spaces into lines of at most `width` (a longer word keeps its own line).
std::string wrapped(const std::string& text, std::size_t width) {
  std::string out, line;
  std::istringstream paragraphs(text);
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    if (!out.empty() || !line.empty()) out += line + "\n";
    line.clear();
    std::istringstream words(paragraph);
    for (std::string word; words >> word;) {
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        out += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
  }
  return out + line;
}

// CLI11's help with every description wrapped to kHelpWidth (CLI11 indents after a newline).
class WrappingFormatter : public CLI::Formatter {
 public:
  WrappingFormatter() { column_width(kHelpNameColumn); }
  std::string make_option_desc(const CLI::Option* option) const override {
    return wrapped(CLI::Formatter::make_option_desc(option), kHelpWidth - kHelpNameColumn);
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(), wrapped(sub->get_description(), kHelpWidth - kHelpNameColumn),
                             kHelpNameColumn);
    return out.str();
  }
  std::string make_description(const CLI::App* app) const override {
    const std::string text = CLI::Formatter::make_description(app);
    return text.empty() ? text : wrapped(text, kHelpWidth) + "\n";
  }
};

// A positional file or folder argument that is missing: one line naming it, before any work.
void require_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw file_error(path, "no such file");
  if (std::filesystem::is_directory(path, ec)) throw file_error(path, "is a folder, not a file");
}
void require_path(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw file_error(path, "no such file or folder");
}
void require_folder(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw file_error(path, "no such folder");
  if (!std::filesystem::is_directory(path, ec)) throw file_error(path, "is not a folder");
}

void add_quiet_flag(CLI::App& app, bool& quiet) {
  app.add_flag("--quiet", quiet, "print only the summary line")->group("Output");
}

std::string joined(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

void add_case_options(CLI::App& app, PlanOptions& plan) {
  app.add_option("--shape", plan.shapes, "B,H,S,D or B,H,Sq,Sk,D; H as Hq:Hkv for GQA/MQA (repeatable)")
      ->group("Cases");
  app.add_option("--mask", plan.masks, mask_help() + " (repeatable)")->group("Cases");
  app.add_option("--dtype", plan.dtypes, "fp16 or bf16 (repeatable)")->group("Cases");
  app.add_option("--dist", plan.dists, "normal, uniform, large, outlier or tiny (repeatable)")->group("Cases");
  // Snapshots store the seed as int64: a larger one could not be replayed.
  app.add_option("--seed", plan.seeds, "input seed, 0 to 2^63-1 (repeatable)")
      ->check(CLI::Range(std::uint64_t{0}, static_cast<std::uint64_t>(INT64_MAX)))
      ->group("Cases");
  app.add_option("--scale", plan.scale, "softmax scale (default 1/sqrt(D))")->group("Cases");
}

// An option whose values are files the command reads: noted as it is parsed, so that an output
// path naming one is refused before any work (not only when the output is written).
CLI::Option* reads_files(CLI::Option* option) {
  return option->each([](const std::string& path) { note_input_file(path); });
}

// --json, --junit and --html FILE; `testcase` says what one JUnit testcase is.
void add_report_options(CLI::App& app, ReportFiles& reports, const std::string& testcase) {
  app.add_option("--json", reports.json, "also write the results as JSON to FILE")->group("Output");
  app.add_option("--junit", reports.junit, "also write JUnit XML to FILE (a testcase per " + testcase + ")")
      ->group("Output");
  CLI::Option* html = app.add_option("--html", reports.html,
                                      "also write a self-contained HTML report to FILE: stage tables, heatmaps of the "
                                      "first divergence, per-row plots, descriptors")
                          ->group("Output");
  app.add_option("--html-stages", reports.html_stages,
                 "also draw heatmaps of these stage outputs in the HTML report (names or kinds: pv, softmax[0]; "
                 "with --html)")
      ->needs(html)
      ->group("Output");
}

// --reference cpu|gpu|auto: where the FP64 reference runs; `live`: the implementation runs
// here (auto may take the GPU), else a recorded run is judged (auto is the CPU).
void add_reference_option(CLI::App& app, JudgeOptions& judge, bool live) {
  app.add_option_function<std::string>(
         "--reference", [&judge](const std::string& v) { judge.reference = parse_reference_device(v); },
         std::string("where the FP64 reference runs: cpu (Eigen), gpu (cuBLAS DGEMM and the same stage arithmetic "
                     "on the device) or auto (default: ") +
             (live ? "the GPU when the implementation runs on one)" : "the CPU)"))
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}))
      ->group("Judging");
}

// --bound tight|worst-case: which bound decides the verdict (docs/error-model.md).
void add_bound_option(CLI::App& app, JudgeOptions& judge) {
  app.add_option_function<std::string>(
         "--bound",
         [&judge](const std::string& v) { judge.judged_by = v == "tight" ? BoundChoice::tight : BoundChoice::worst; },
         "which error bound decides: tight (default: probabilistic, grows like sqrt(n)) or worst-case (only "
         "elements over the worst-case bound fail)")
      ->check(CLI::IsMember({"tight", "worst-case"}))
      ->group("Judging");
}

}  // namespace

namespace {
int run_command(int argc, char** argv);
}  // namespace

int run_cli(int argc, char** argv) {
  const int code = run_command(argc, argv);
  if (const std::optional<std::string> late = late_failure()) {  // a plugin's destroy crashed or threw
    std::cerr << "flashcore-check: " << one_line(*late) << "\n";
    return kExitUsage;
  }
  return code;
}

namespace {

int run_command(int argc, char** argv) {
  guard_input_files();  // no output of a command is written over a file it read
  CLI::App app{
      "flashcore-check: runs attention implementations stage by stage, checks every stage for NaN/Inf on the "
      "device, compares it with an FP64 reference under a derived error bound, and names where and why the "
      "numbers first go wrong.\n\nExit codes: 0 all cases pass, 1 a divergence was found, 2 usage, input or "
      "environment error (or nothing judged: every case skipped), 3 a run did not finish within FC_RUN_TIMEOUT seconds (600 when unset): it hangs.",
      "flashcore-check"};
  app.formatter(std::make_shared<WrappingFormatter>());
  app.require_subcommand(0, 1);

  TraceCommand trace;
  trace.command_line = joined(argc, argv);
  bool do_trace = false;
  app.add_flag("--trace", do_trace,
               "run every implementation (or --impl) on the default cases (or the cases given) and report each "
               "stage; without a GPU, runs the CPU implementations and the reference self-check");
  app.add_option("--impl", trace.impls, "implementation to run (repeatable; `list` shows them)");
  app.add_option("--inject", trace.inject,
                 "plant a fault (`list` shows them) in the implementations that have it; the others are skipped");
  add_case_options(app, trace.plan);
  add_bound_option(app, trace.judge);
  add_reference_option(app, trace.judge, true);
  app.add_option_function<std::string>(
         "--rows", [&trace](const std::string& v) { trace.judge.rows = parse_rows(v); },
         "query rows compared: all (default), N a head (first and last, block and tile boundaries, rows where "
         "a flat offset crosses 2^16/2^31/2^32, the rest spread evenly) or a list r1,r2,...; flags cover every "
         "element")
      ->group("Judging");
  app.add_option("--window-rows", trace.judge.window_rows,
                 "run a fused kernel's trace build in windows of N query rows, each judged and dropped before the "
                 "next (default: only when its whole trace does not fit the device; not with --snapshot or --html)")
      ->check(CLI::Range(1, 1 << 30))
      ->group("Judging");
  std::string sanitize_tool;
  app.add_option("--sanitize", sanitize_tool,
                 "run the --trace in a child process under compute-sanitizer's TOOL (memcheck, racecheck, "
                 "synccheck, initcheck; the verdicts are that run's, FC_RUN_TIMEOUT 12000 s unless set): what the "
                 "tool finds (message, device function, source line) is reported after them and in --json; exit 1 "
                 "when it reports an error. Finds what the numbers do not show, such as a race that left every value "
                 "right")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kSanitizerTools), std::end(kSanitizerTools))))
      ->group("Judging");
  app.add_flag("--profile-evaluation", trace.judge.profile_evaluation,
               "time each step of the FP64 evaluation (thread-seconds; the device's queued work finished between "
               "steps, so it runs slower) and print them under each case, and in the JSON")
      ->group("Judging");
  add_report_options(app, trace.reports, "case and implementation");
  CLI::Option* snapshot =
      app.add_option("--snapshot", trace.snapshot,
                     "write an HDF5 snapshot for `replay`: FILE holds one case, the first that diverged (else the "
                     "first); an existing folder gets every case as IMPL.N.h5")
          ->group("Output");
  app.add_option("--snapshot-stages", trace.snapshot_stages,
                 "store only these stage tensors (names or kinds: pv, softmax[0], normalize; with --snapshot)")
      ->needs(snapshot)
      ->group("Output");
  app.add_flag("--fixture", trace.fixture, "write the snapshots as regression fixtures (with --snapshot)")
      ->needs(snapshot)
      ->group("Output");
  app.add_flag("--dump-descriptors", trace.dump_descriptors,
               "print every cuBLASLt call's descriptors, read back from cuBLASLt, and its lint findings")
      ->group("Output");
  add_quiet_flag(app, trace.quiet);

  ReferenceCommand reference;
  reference.command_line = trace.command_line;
  CLI::App* ref = app.add_subcommand(
      "reference", "compute every reference stage of a bug report (PyTorch SDPA form, .npz) in FP64 into HDF5");
  reads_files(ref->add_option("input", reference.input, "the report: q, k, v [B,H,S,D], optional attn_mask, scale, is_causal"))
      ->required();
  ref->add_option("--out", reference.out, "HDF5 file to write (docs/snapshot-format.md)")->required();
  ref->add_option("--page-width", reference.page_width, "also write the online-softmax quantities per page of this width");
  ref->add_option("--splits", reference.splits, "also write the split-KV partials and their combine");

  CLI::App* list = app.add_subcommand("list", "list the implementations (built in and from plugins) and the faults");

  CheckCommand check;
  check.command_line = trace.command_line;
  CLI::App* check_cmd = app.add_subcommand(
      "check", "judge a kernel's captured outputs (out, lse, intermediates) against the FP64 reference under the "
               "bounds of its arithmetic: INPUTS [OUTPUT], or several captures or folders of them, in parallel");
  reads_files(check_cmd->add_option("files", check.paths, "captures (.npz or .h5: q, k, v and out, lse, ...; docs/check.md)"))
      ->required();
  check_cmd->add_option("--arithmetic", check.arithmetic, "how the kernel computes: " + arithmetic_help());
  add_report_options(*check_cmd, check.reports, "capture");
  add_quiet_flag(*check_cmd, check.quiet);

  ReplayCommand replay;
  replay.command_line = trace.command_line;
  CLI::App* replay_cmd = app.add_subcommand(
      "replay", "recompute the references and comparisons of a snapshot (on the CPU unless --reference gpu) and report "
                "as the live run did");
  reads_files(replay_cmd->add_option("file", replay.file, "snapshot or fixture (.h5)"))->required();
  add_report_options(*replay_cmd, replay.reports, "snapshot");
  add_bound_option(*replay_cmd, replay.judge);
  add_reference_option(*replay_cmd, replay.judge, false);
  add_quiet_flag(*replay_cmd, replay.quiet);

  DiffCommand diff;
  CLI::App* diff_cmd = app.add_subcommand("diff", "compare two snapshots of the same case stage by stage");
  reads_files(diff_cmd->add_option("a", diff.a, "the snapshot before"))->required();
  reads_files(diff_cmd->add_option("b", diff.b, "the snapshot after"))->required();
  add_quiet_flag(*diff_cmd, diff.quiet);

  FaultsCommand faults;
  faults.command_line = trace.command_line;
  CLI::App* faults_cmd = app.add_subcommand(
      "faults", "the detection matrix: every planted fault found at the right stage, element and cause");
  faults_cmd->add_option("--fault", faults.faults, "only these faults (list shows them)");
  faults_cmd->add_option("--impl", faults.impls, "only these implementations");
  faults_cmd->add_option("--sweep", faults.sweep, "also run N clean random cases through every implementation")
      ->check(CLI::Range(0, 1000000));
  faults_cmd->add_option("--long-sweep", faults.long_sweep,
                         "also run N clean random cases of 1 to 64 query rows against 4096 to 16384 keys")
      ->check(CLI::Range(0, 1000000));
  faults_cmd->add_option("--snapshots", faults.snapshots, "write each faulty run as a fixture into DIR")
      ->check(CLI::ExistingDirectory);
  add_report_options(*faults_cmd, faults.reports, "fault and implementation");
  add_quiet_flag(*faults_cmd, faults.quiet);

  TriageCommand triage;
  triage.command_line = trace.command_line;
  CLI::App* triage_cmd = app.add_subcommand(
      "triage", "a NaN bug report (.npz in PyTorch SDPA form, or .h5): input findings, the first bad stage of each "
                "implementation with its cause, and --minimize");
  reads_files(triage_cmd->add_option("report", triage.report, "the report"))->required();
  triage_cmd->add_option("--impl", triage.impls, "only these implementations");
  triage_cmd->add_option("--dtype", triage.dtype, "fp16 or bf16: what fp32 inputs are rounded to for the kernels")
      ->check(CLI::IsMember({"fp16", "bf16"}));
  triage_cmd->add_option("--inject", triage.inject,
                         "plant a fault (`list` shows them) in the implementations that have it: how would that "
                         "bug behave on this report; the others are not run");
  triage_cmd->add_option("--minimize", triage.minimize,
                         "delta-debug to the smallest case that fails the same way and write it as a fixture");
  triage_cmd->add_option("--arithmetic", triage.arithmetic,
                         "how the kernel that wrote the report's outputs computes (they are judged under its bounds; "
                         "as check's): " + arithmetic_help());
  add_report_options(*triage_cmd, triage.reports, "implementation");
  add_bound_option(*triage_cmd, triage.judge);
  add_reference_option(*triage_cmd, triage.judge, true);
  add_quiet_flag(*triage_cmd, triage.quiet);

  FixturesCommand fixtures;
  fixtures.command_line = trace.command_line;
  CLI::App* fixtures_cmd = app.add_subcommand(
      "fixtures", "check every regression fixture: integrity, reference, replayed verdict; with a GPU, live runs");
  fixtures_cmd->add_option("dir", fixtures.dir, "the fixtures folder (default: fixtures)");
  add_report_options(*fixtures_cmd, fixtures.reports, "fixture and check");
  add_quiet_flag(*fixtures_cmd, fixtures.quiet);
  fixtures_cmd->add_flag("--write-manifest", fixtures.write_manifest, "rewrite DIR/MANIFEST from the fixtures");

  DescribeCommand describe;
  CLI::App* describe_cmd = app.add_subcommand(
      "describe", "print an implementation's cuBLASLt descriptors and lint findings without running anything");
  describe_cmd->add_option("--impl", describe.impl, "the implementation")->required();
  describe_cmd->add_option("--inject", describe.inject, "plant a fault first");
  add_case_options(*describe_cmd, describe.plan);

  BenchCommand bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "measure: reference GFLOP/s, flag-kernel bandwidth vs device copy, traced vs untraced runs");
  bench_cmd->add_option("--impl", bench.impls, "implementations to time (default: all GPU ones)");
  bench_cmd->add_option("--shape", bench.shapes, "B,H,S,D shapes to time, H as Hq:Hkv for GQA (repeatable)");
  bench_cmd->add_option("--mask", bench.masks, "none and/or causal (default both)");
  bench_cmd->add_option("--baseline", bench.baseline_file,
                        "PyTorch SDPA timings (scripts/sdpa_bench.py) to print each implementation's ratio to")
      ->check(CLI::ExistingFile);
  bench_cmd->add_flag("--quick", bench.quick, "smaller sizes, for a smoke test");

  SensitivityCommand sensitivity;
  sensitivity.command_line = trace.command_line;
  CLI::App* sensitivity_cmd = app.add_subcommand(
      "sensitivity", "detection power: plant small realistic bugs into correct runs' stage outputs and count what "
                     "is caught, per bug, stage and key length; clean runs must not alarm");
  sensitivity_cmd->add_option("--impl", sensitivity.impls, "implementations (default: all that run here)");
  sensitivity_cmd->add_option("--sk", sensitivity.kv_lens, "key lengths (default 512 4096 16384 65536)");
  sensitivity_cmd->add_option("--dtype", sensitivity.dtypes, "fp16 and/or bf16 (default both)");
  sensitivity_cmd->add_option("--seeds", sensitivity.seeds, "trials of every cell, each on its own inputs (default 4)")
      ->check(CLI::Range(1, 1000));
  sensitivity_cmd->add_option("--rows", sensitivity.rows, "query rows of every case (default 32)")
      ->check(CLI::Range(2, 1 << 20));
  add_bound_option(*sensitivity_cmd, sensitivity.judge);
  sensitivity_cmd->add_option("--json", sensitivity.reports.json, "also write the cells as JSON to FILE")
      ->group("Output");
  sensitivity_cmd
      ->add_option("--html", sensitivity.reports.html,
                   "also write a self-contained HTML report to FILE: detection rate against Sk per implementation "
                   "and dtype, the cells as tables, any false alarm")
      ->group("Output");

  CLI::App* version = app.add_subcommand("version", "print the version, build and device");

  // Plugins are loaded before any command: the option is the program's and every command's.
  std::vector<std::string> plugins;
  const std::string plugin_help =
      "load attention implementations from a plugin library (include/flashcore/plugin.h; repeatable; also "
      "FLASHCORE_PLUGINS=PATH:PATH)";
  CLI::Option* plugin_option = reads_files(app.add_option("--plugin", plugins, plugin_help))->group("Plugins");
  for (CLI::App* command : app.get_subcommands({})) reads_files(command->add_option("--plugin", plugins, plugin_help))->group("Plugins");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "flashcore-check: " << one_line(e.what()) << " (see --help)\n";
    return kExitUsage;
  } catch (const Error& e) {  // an option read as it is parsed (--rows)
    std::cerr << "flashcore-check: " << one_line(e.what()) << "\n";
    return kExitUsage;
  }

  // An option given an empty value (`--json ''`, `--mask ''`) would read as one not given.
  std::vector<const CLI::App*> parsed{&app};
  for (const CLI::App* command : app.get_subcommands()) parsed.push_back(command);
  for (const CLI::App* command : parsed) {
    for (const CLI::Option* option : command->get_options()) {
      const std::vector<std::string>& values = option->results();
      if (option->count() > 0 && std::find(values.begin(), values.end(), "") != values.end()) {
        std::cerr << "flashcore-check: " << option->get_name() << ": an empty value\n";
        return kExitUsage;
      }
    }
  }

  // Options before a subcommand's name belong to --trace: with a subcommand they would be
  // silently ignored (`--inject X describe` describes the clean implementation).
  if (!app.get_subcommands().empty()) {
    for (const CLI::Option* option : app.get_options()) {
      if (option->count() > 0 && option != plugin_option) {
        std::cerr << "flashcore-check: " << option->get_name() << " is an option of --trace, not of "
                  << app.get_subcommands().front()->get_name() << " (give the subcommand's options after its name)\n";
        return kExitUsage;
      }
    }
  }

  try {
    run_timeout_seconds();  // a bad FC_RUN_TIMEOUT is refused before anything runs
    if (ref->parsed()) require_file(reference.input);
    if (replay_cmd->parsed()) require_file(replay.file);
    if (diff_cmd->parsed()) {
      require_file(diff.a);
      require_file(diff.b);
    }
    if (triage_cmd->parsed()) require_file(triage.report);
    if (check_cmd->parsed()) {
      for (const std::string& path : check.paths) require_path(path);
    }
    if (fixtures_cmd->parsed()) {
      if (fixtures.dir.empty()) fixtures.dir = "fixtures";
      require_folder(fixtures.dir);
    }
    if (!sanitize_tool.empty()) {
      if (!do_trace && trace.impls.empty()) throw Error("--sanitize runs --trace under compute-sanitizer: give --trace");
      return run_sanitized_trace(sanitize_tool, std::vector<std::string>(argv + 1, argv + argc), trace.reports,
                                 trace.snapshot, trace.command_line);
    }
    load_plugins(plugins);
    if (ref->parsed()) return run_reference(reference);
    if (list->parsed()) return run_list();
    if (check_cmd->parsed()) return run_check(check);
    if (describe_cmd->parsed()) return run_describe(describe);
    if (replay_cmd->parsed()) return run_replay(replay);
    if (diff_cmd->parsed()) return run_diff(diff);
    if (faults_cmd->parsed()) return run_faults(faults);
    if (triage_cmd->parsed()) return run_triage(triage);
    if (fixtures_cmd->parsed()) return run_fixtures(fixtures);
    if (bench_cmd->parsed()) return run_bench(bench);
    if (sensitivity_cmd->parsed()) return run_sensitivity(sensitivity);
    if (version->parsed()) return run_version();
    if (do_trace || !trace.impls.empty()) return run_trace(trace);
    std::cerr << "flashcore-check: nothing to do: give --trace or a subcommand (see --help)\n";
    return kExitUsage;
  } catch (const Error& e) {
    std::cerr << "flashcore-check: " << one_line(e.what()) << "\n";
    return kExitUsage;
  } catch (const PluginFailure& e) {  // a plugin failed, threw or crashed: the process stops judging
    std::cerr << "flashcore-check: " << one_line(e.what()) << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {  // a bug of ours: still one line, and files are cleaned up on the way out
    std::cerr << "flashcore-check: internal error: " << one_line(e.what()) << "\n";
    return kExitUsage;
  }
}

}  // namespace

}  // namespace fc

// Plugins (include/flashcore/plugin.h) through the real command line: a CPU plugin runs in
// every command as a built-in implementation does; broken plugins (tests/plugins/) end the
// command with one line and exit 2, never a crash, never a half-written file.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "catch.h"
#include "core/watchdog.h"
#include "harness/faults/isolated_run.h"
#include "harness/plugin/crash_guard.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

const std::string kPluginDir = FC_TEST_PLUGIN_DIR;
std::string plugin(const std::string& name) { return kPluginDir + "/" + name + ".so"; }

struct Outcome {
  bool crashed = false;
  int exit_code = -1;
  std::string out;
  std::vector<std::string> err;
};

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("fc_plugin_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(path), fs::directory_iterator()));
  }
};

Outcome cli(const std::string& arguments, const TempDir& dir, const std::string& environment = "") {
  const fs::path out = dir.path.parent_path() / ("fc_plugin_out_" + std::to_string(::getpid()));
  const fs::path err = dir.path.parent_path() / ("fc_plugin_err_" + std::to_string(::getpid()));
  const std::string command = environment + " " + std::string(FC_CLI_PATH) + " " + arguments + " >" + out.string() +
                              " 2>" + err.string();
  const int status = std::system(command.c_str());
  Outcome o;
  o.crashed = !WIFEXITED(status);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream o_in(out), e_in(err);
  o.out.assign(std::istreambuf_iterator<char>(o_in), std::istreambuf_iterator<char>());
  for (std::string line; std::getline(e_in, line);) o.err.push_back(line);
  fs::remove(out);
  fs::remove(err);
  return o;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// stderr less the no-GPU banner, which a command prints there before its work on a machine without one.
std::vector<std::string> errors_of(const Outcome& o) {
  std::vector<std::string> errors;
  for (const std::string& line : o.err) {
    if (line.rfind("no CUDA device", 0) != 0) errors.push_back(line);
  }
  return errors;
}

}  // namespace

TEST_CASE("a CPU plugin is listed, described and traced stage by stage on every mask kind", "[plugin]") {
  TempDir dir;
  const std::string p = " --plugin " + plugin("test_plugin");
  Outcome o = cli("list" + p, dir);
  CHECK(o.exit_code == 0);
  CHECK(contains(o.out, "test-cpu-plugin"));
  CHECK(contains(o.out, "[cpu] CPU test plugin: unfused fp32 attention on the host (plugin "));
  CHECK(contains(o.out, "test-plugin-masked-row-nan"));
  o = cli("describe --impl test-cpu-plugin --shape 1,2,16,16,64" + p, dir);
  CHECK(o.exit_code == 0);
  CHECK(contains(o.out, "test-cpu-plugin makes no cuBLASLt calls"));
  CHECK(contains(o.out, "    softmax: probs fp32, max row_max fp32, sum row_sum fp32"));
  CHECK(contains(o.out, "pv fp16/fp32/fp32;"));

  const fs::path json = dir.path / "trace.json";
  o = cli("--trace --impl test-cpu-plugin --impl cpu-emulated --shape 2,2,33,70,64 --dtype fp16 --dtype bf16 "
          "--mask none --mask causal-br+padding --mask masked-rows --mask bias --json " + json.string() + p,
          dir);
  INFO(o.out);
  CHECK(o.exit_code == 0);
  CHECK(contains(o.out, "8 cases x 2 implementations: 16 pass"));
  CHECK(contains(o.out, "test-cpu-plugin | B2 H2 Sq33 Sk70 D64 bf16 causal-br+padding"));
  CHECK(contains(o.out, "  softmax.sum "));
  CHECK(contains(o.out, "  lse "));
  CHECK(fs::exists(json));

  // A mask part it does not handle: its cases are skipped, and a trace that judged nothing is
  // not a pass.
  o = cli("--trace --impl test-cpu-plugin --shape 1,1,16,64 --mask window=4,0 --json " + json.string() + p, dir);
  CHECK(o.exit_code == 2);
  CHECK(contains(o.out, "1 case x 1 implementation: 0 pass, 0 diverged, 0 error, 1 skipped"));
  REQUIRE_FALSE(o.err.empty());  // after the no-device banner where there is no GPU
  CHECK(contains(o.err.back(), "flashcore-check: nothing was judged: every case was skipped"));
  o = cli("--trace --impl test-cpu-plugin --impl cpu-emulated --shape 1,1,16,64 --mask window=4,0" + p, dir);
  CHECK(o.exit_code == 0);  // cpu-emulated judged it
  // What fc_problem cannot tell it is skipped, never run as another problem and judged as this one.
  for (const auto& [arguments, reason] : std::vector<std::pair<std::string, std::string>>{
           {"--shape 1,1,16,64 --mask window=4,0", "cannot pass a sliding window"},
           {"--shape 1,2,16,64 --mask alibi", "cannot pass ALiBi slopes"},
           {"--shape 1,1,16,64 --mask softcap=5", "cannot pass a softcap"},
           {"--shape 2,1,16,64 --mask varlen", "cannot pass variable sequence lengths"},
           {"--shape 1,4:2,16,64", "declares no GQA/MQA support"}}) {
    o = cli("--trace --impl test-cpu-plugin " + arguments + p, dir);
    INFO(arguments);
    CHECK(o.exit_code == 2);
    CHECK(contains(o.out, "skipped: " ));
    CHECK(contains(o.out, reason));
  }
  o = cli("--trace --impl test-cpu-plugin --shape 1,1,40,64 --mask paged=8" + p, dir);  // padded K/V: the same problem
  CHECK(o.exit_code == 0);

  // The same plugin from the environment, for every command.
  o = cli("list", dir, "FLASHCORE_PLUGINS=" + plugin("test_plugin"));
  CHECK(o.exit_code == 0);
  CHECK(contains(o.out, "test-cpu-plugin"));
}

TEST_CASE("a plugin's fault joins the matrix and is found where it declares, and triage and fixtures run the plugin",
          "[plugin]") {
  TempDir dir;
  const std::string p = " --plugin " + plugin("test_plugin");
  Outcome o = cli("faults --fault test-plugin-masked-row-nan" + p, dir);
  INFO(o.out);
  CHECK(o.exit_code == 0);
  CHECK(contains(o.out, "1 fault x implementation cells: stage right 1/1 (100%), first index right 1/1 (100%), "
                        "cause right 1/1 (100%); clean runs without alarm 1/1 (100%)"));
  o = cli("--trace --impl test-cpu-plugin --inject test-plugin-masked-row-nan --shape 1,1,8,8,32 --mask padding=0" + p,
          dir);
  CHECK(o.exit_code == 1);
  CHECK(contains(o.out, "cause:    fully-masked-row"));

  o = cli("triage " + std::string(FC_TEST_DATA_DIR) + "/sdpa_fp16_causal.npz --impl test-cpu-plugin" + p, dir);
  CHECK(o.exit_code == 0);
  CHECK(contains(o.out, "test-cpu-plugin: pass"));

  fs::create_directories(dir.path / "fixtures");
  fs::copy_file(std::string(FC_SOURCE_DIR) + "/fixtures/masked-row-nan.cpu-emulated.h5",
                dir.path / "fixtures" / "masked-row-nan.cpu-emulated.h5");
  REQUIRE(cli("fixtures " + (dir.path / "fixtures").string() + " --write-manifest", dir).exit_code == 0);
  const fs::path junit = dir.path / "fixtures.xml";
  o = cli("fixtures " + (dir.path / "fixtures").string() + " --junit " + junit.string() + p, dir);
  CHECK(o.exit_code == 0);
  CHECK(contains(o.out, "masked-row-nan.cpu-emulated.h5: cpu-emulated with masked-row-nan, "));
  std::ifstream junit_in(junit);
  const std::string junit_text((std::istreambuf_iterator<char>(junit_in)), std::istreambuf_iterator<char>());
  CHECK(contains(junit_text, "name=\"live test-cpu-plugin\""));
}

TEST_CASE("a broken plugin ends the command with one line naming it, exit 2, and nothing half-written", "[plugin]") {
  TempDir dir;
  const fs::path json = dir.path / "out.json", snapshot = dir.path / "snap.h5";
  const std::string trace = "--trace --shape 1,1,8,8,32 --json " + json.string() + " --snapshot " + snapshot.string();
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"test_plugin_no_entry", "list", "no symbol flashcore_plugin: not a flashcore-check plugin"},
      {"test_plugin_abi2", "list", "built for plugin ABI version 2, this flashcore-check speaks version 1"},
      {"test_plugin_named_naive", "list", "implementation 'naive' is already taken"},
      {"missing_plugin", "list", "cannot load"},
      {"test_plugin_window_fault", "list",
       "fault 'test-plugin-masked-row-nan': trigger case: 'test-cpu-plugin' would skip it: the plugin interface "
       "(version 1) cannot pass a sliding window"},
      {"test_plugin_crash_run", trace + " --impl test-cpu-plugin", "test-cpu-plugin: run crashed with SIGSEGV"},
      {"test_plugin_abort_prepare", trace + " --impl test-cpu-plugin", "test-cpu-plugin: prepare crashed with SIGABRT"},
      {"test_plugin_fail_run", trace + " --impl test-cpu-plugin", "run failed: the test plugin failed on purpose"},
      {"test_plugin_undeclared", trace + " --impl test-cpu-plugin",
       "run: the harness refused: implementation captured stage 7 output 0, which its stage graph does not declare"},
      {"test_plugin_bad_strides", trace + " --impl test-cpu-plugin",
       "run: the harness refused: tap: strides [1,1,1,1] are not a dense permutation of dims"},
      {"test_plugin_view_overrun", trace + " --impl test-cpu-plugin",
       "elements runs past the end of buffer"},
      {"test_plugin_throwing", trace + " --impl throwing-plugin",
       "throwing-plugin: stage_graph threw an exception: the throwing plugin's stage graph"},
      {"test_plugin_crash_run", "faults --fault test-plugin-masked-row-nan --json " + json.string(), "run crashed"},
  };
  for (const auto& [name, command, message] : cases) {
    INFO(name << ": " << command);
    const Outcome o = cli(command + " --plugin " + plugin(name), dir);
    CHECK_FALSE(o.crashed);
    CHECK(o.exit_code == 2);
    const std::vector<std::string> errors = errors_of(o);
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].rfind("flashcore-check: ", 0) == 0);
    CHECK(contains(errors[0], plugin(name)));
    CHECK(contains(errors[0], message));
    CHECK(dir.entries() == 0);  // no report, no snapshot, no staged temporary
  }
  // A crash in destroy comes after the run and its reports (a destructor calls it): the command
  // still ends with the one line and exit 2, where it went on silently.
  const Outcome destroyed = cli("--trace --shape 1,1,8,8,32 --impl test-cpu-plugin --plugin " +
                                    plugin("test_plugin_crash_destroy"), dir);
  CHECK_FALSE(destroyed.crashed);
  CHECK(destroyed.exit_code == 2);
  const std::vector<std::string> destroy_errors = errors_of(destroyed);
  REQUIRE(destroy_errors.size() == 1);
  CHECK(contains(destroy_errors[0], "test-cpu-plugin: destroy crashed with SIGSEGV"));
  // A library named by FLASHCORE_PLUGINS is named so, not as an option that was never given.
  const Outcome from_environment = cli("list", dir, "FLASHCORE_PLUGINS=" + plugin("test_plugin_no_entry"));
  CHECK(from_environment.exit_code == 2);
  const std::vector<std::string> errors = errors_of(from_environment);
  REQUIRE(errors.size() == 1);
  CHECK(contains(errors[0], "FLASHCORE_PLUGINS entry " + plugin("test_plugin_no_entry") + ": no symbol flashcore_plugin"));
}

TEST_CASE("a plugin named twice, through a link or by another spelling, is loaded once", "[plugin]") {
  TempDir dir;
  const fs::path link = dir.path / "link.so";
  fs::create_symlink(fs::absolute(plugin("test_plugin")), link);
  const Outcome o = cli("list --plugin " + plugin("test_plugin") + " --plugin " + link.string(), dir,
                        "FLASHCORE_PLUGINS=" + fs::absolute(plugin("test_plugin")).string());
  CHECK(o.exit_code == 0);
  CHECK(errors_of(o).empty());
  CHECK(contains(o.out, "test-cpu-plugin"));
}

TEST_CASE("a run that never finishes ends the command after FC_RUN_TIMEOUT: one line naming it, exit 3", "[plugin]") {
  TempDir dir;
  const fs::path json = dir.path / "out.json";
  const Outcome o = cli("--trace --shape 1,1,8,8,32 --impl test-cpu-plugin --json " + json.string() + " --plugin " +
                            plugin("test_plugin_hang_run"),
                        dir, "FC_RUN_TIMEOUT=1");
  CHECK_FALSE(o.crashed);
  CHECK(o.exit_code == kExitHang);
  const std::vector<std::string> errors = errors_of(o);
  REQUIRE(errors.size() == 1);
  CHECK(contains(errors[0], "test-cpu-plugin: the trace build's run did not finish within 1 s: it hangs"));
  CHECK(dir.entries() == 0);  // no half-written report
  // A limit that is not a number of seconds is refused before anything runs.
  const Outcome bad = cli("--trace --shape 1,1,8,8,32 --impl test-cpu-plugin --plugin " + plugin("test_plugin"), dir,
                          "FC_RUN_TIMEOUT=soon");
  CHECK(bad.exit_code == 2);
  REQUIRE(errors_of(bad).size() == 1);
  CHECK(contains(errors_of(bad)[0], "FC_RUN_TIMEOUT='soon'"));
}

TEST_CASE("an isolated run reads a child's verdict back, and a child that hangs is cause hang", "[plugin][faults]") {
  CaseSpec trigger;
  trigger.shape = parse_shape("1,1,8,8,32");
  trigger.mask = "padding=0";
  trigger.seed = 1;
  const auto judged_with = [&](const std::string& plugin_name, double timeout) {
    ::setenv("FLASHCORE_PLUGINS", plugin(plugin_name).c_str(), 1);
    const CaseResult r = judge_in_child(FC_CLI_PATH, "test-cpu-plugin", "test-plugin-masked-row-nan", trigger, {},
                                        timeout);
    ::unsetenv("FLASHCORE_PLUGINS");
    return r;
  };
  const CaseResult found = judged_with("test_plugin", 60);
  INFO(found.reason);
  CHECK(found.verdict == Verdict::diverged);
  REQUIRE(found.divergence);
  CHECK(found.divergence->cause == "fully-masked-row");
  CHECK(found.divergence->index.b == 0);
  CHECK(found.divergence->index.row == 0);

  const CaseResult hung = judged_with("test_plugin_hang_run", 1);
  CHECK(hung.verdict == Verdict::diverged);
  REQUIRE(hung.divergence);
  CHECK(hung.divergence->cause == "hang");
  CHECK(contains(hung.divergence->evidence, "did not finish within 1 s"));

  const CaseResult failed = judged_with("test_plugin_crash_run", 60);  // exit 2: an error, with its line
  CHECK(failed.verdict == Verdict::error);
  CHECK(contains(failed.reason, "exited with status 2"));
  CHECK(contains(failed.reason, "run crashed with SIGSEGV"));
}

TEST_CASE("a guarded call survives a fatal signal and an exception, and the next call runs", "[plugin]") {
  const auto segfault = [] { std::raise(SIGSEGV); };
  CHECK_THROWS_WITH(guarded("plugin x", "run", segfault), "plugin x: run crashed with SIGSEGV, a bad memory access");
  const auto fpe = [] { std::raise(SIGFPE); };
  CHECK_THROWS_AS(guarded("plugin x", "run", fpe), PluginFailure);
  const auto throws = [] { throw std::logic_error("inside"); };
  CHECK_THROWS_WITH(guarded("plugin x", "prepare", throws), "plugin x: prepare threw an exception: inside");
  int ran = 0;
  guarded("plugin x", "run", [&] { ++ran; });
  CHECK(ran == 1);
}

}  // namespace fc

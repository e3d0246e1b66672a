#include "harness/faults/isolated_run.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/child_process.h"
#include "core/error.h"
#include "core/json.h"
#include "core/numeric.h"
#include "core/temporary_folder.h"
#include "core/watchdog.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

std::string rows_argument(const RowSpec& rows) {
  if (rows.kind == RowSpec::Kind::sample) return std::to_string(rows.count);
  std::string list;
  for (std::int64_t r : rows.rows) list += (list.empty() ? "" : ",") + std::to_string(r);
  if (rows.rows.size() == 1) list += "," + list;  // one number alone would read as a sample size
  return list;
}

// Runs `args` with FC_RUN_TIMEOUT set, its output to `log`; the exit status, or -signal. A
// child still running `deadline` seconds on (its own watchdog failed) is killed.
int run_child(const std::vector<std::string>& args, const fs::path& log, double timeout_seconds, double deadline) {
  ChildProcess child{args, {"FC_RUN_TIMEOUT=" + number_text(timeout_seconds)}, log.string(), deadline};
  return run_child_process(child, "faults: an isolated run");
}

std::string last_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

Verdict verdict_of(const std::string& name) {
  for (Verdict v : {Verdict::pass, Verdict::diverged, Verdict::error, Verdict::skipped}) {
    if (name == verdict_name(v)) return v;
  }
  throw Error("faults: an isolated run's JSON has verdict '" + name + "'");
}

std::int64_t index_field(const Json& index, const char* key) {
  return index.contains(key) && index[key].is_number_integer() ? index[key].get<std::int64_t>() : -1;
}

// The child's one case, from its JSON (docs/json-output.md).
CaseResult read_case(const fs::path& json, const std::string& impl) {
  std::ifstream in(json);
  const Json document = Json::parse(in);
  const Json& c = document.at("cases").at(0);
  CaseResult r;
  r.impl = impl;
  r.verdict = verdict_of(c.at("verdict").get<std::string>());
  if (c.contains("reason") && c["reason"].is_string()) r.reason = c["reason"].get<std::string>();
  if (c.contains("first_divergence") && c["first_divergence"].is_object()) {
    const Json& f = c["first_divergence"];
    Divergence d;
    d.stage = f.value("stage", "");
    d.output = f.value("output", "");
    d.cause = f.value("cause", "");
    d.evidence = f.value("evidence", "");
    d.stage_local = f.value("stage_local", false);
    if (f.contains("index") && f["index"].is_object()) {
      const Json& i = f["index"];
      d.index = {index_field(i, "b"), index_field(i, "h"), index_field(i, "row"), index_field(i, "col")};
    }
    r.divergence = d;
  }
  return r;
}

}  // namespace

std::vector<std::string> case_arguments(const CaseSpec& spec) {
  std::vector<std::string> args = {"--shape", shape_argument(spec.shape), "--mask", spec.mask, "--dtype",
                                   dtype_name(spec.dtype), "--dist", spec.dist, "--seed", std::to_string(spec.seed)};
  if (spec.scale) {
    std::ostringstream scale;
    scale.precision(17);
    scale << *spec.scale;
    args.insert(args.end(), {"--scale", scale.str()});
  }
  return args;
}

CaseResult judge_in_child(const std::string& executable, const std::string& impl, const std::string& fault,
                          const CaseSpec& trigger, const RowSpec& rows, double timeout_seconds) {
  const TemporaryFolder files("flashcore-isolated", "faults: an isolated run");
  const fs::path json = files.path() / "case.json", log = files.path() / "child.log";
  std::vector<std::string> args = {executable.empty() ? fs::read_symlink("/proc/self/exe").string() : executable,
                                   "--trace", "--impl", impl, "--inject",
                                   fault, "--json", json.string(), "--quiet"};
  for (const std::string& a : case_arguments(trigger)) args.push_back(a);
  if (rows.kind != RowSpec::Kind::all) args.insert(args.end(), {"--rows", rows_argument(rows)});
  // Time to start CUDA and judge the case comes on top of the run's own limit.
  const int status = run_child(args, log, timeout_seconds, timeout_seconds + 300);
  CaseResult r;
  r.impl = impl;
  if (status == kExitHang) {
    r.verdict = Verdict::diverged;
    Divergence d;
    d.stage = d.output = "(the run)";
    d.cause = "hang";
    d.evidence = "the run in a child process did not finish within " + number_text(timeout_seconds) +
                 " s: " + last_line(log);
    r.divergence = d;
    return r;
  }
  if ((status == 0 || status == 1) && fs::exists(json)) {
    try {
      return read_case(json, impl);
    } catch (const std::exception& e) {
      r.verdict = Verdict::error;
      r.reason = std::string("an isolated run's JSON could not be read: ") + e.what();
      return r;
    }
  }
  r.verdict = Verdict::error;
  r.reason = "the isolated run " + (status < 0 ? "was killed by signal " + std::to_string(-status)
                                                : "exited with status " + std::to_string(status)) +
             ": " + last_line(log);
  return r;
}

}  // namespace fc

#include "harness/sanitize/sanitized_trace.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/child_process.h"
#include "core/error.h"
#include "core/json.h"
#include "core/temporary_folder.h"
#include "core/watchdog.h"
#include "harness/cli/commands.h"
#include "harness/io/staged_file.h"
#include "harness/io/text_output.h"
#include "harness/sanitize/sanitizer_log.h"
#include "stages/device_info.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

constexpr int kSanitizedRunTimeout = 12000;  // seconds: 20 times the watchdog's default

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0 && !fs::is_directory(path); }

Json finding_json(const SanitizerFinding& f) {
  Json j;
  j["severity"] = f.severity;
  j["message"] = f.message;
  j["function"] = f.function;
  j["where"] = f.where;
  j["records"] = f.records;
  j["hazards"] = f.hazards;
  j["first_record"] = f.first_record;
  return j;
}

Json report_json(const SanitizerReport& r) {
  Json j;
  j["tool"] = r.tool;
  j["errors"] = r.errors;
  j["warnings"] = r.warnings;
  j["complete"] = r.summary_seen && r.process_messages.empty();
  j["process_messages"] = r.process_messages;
  j["findings"] = Json::array();
  for (const SanitizerFinding& f : r.findings) j["findings"].push_back(finding_json(f));
  return j;
}

void print_report(const SanitizerReport& r) {
  constexpr std::size_t kShown = 8;
  std::printf("\ncompute-sanitizer %s: %lld error%s, %lld warning%s%s\n", r.tool.c_str(),
              static_cast<long long>(r.errors), r.errors == 1 ? "" : "s", static_cast<long long>(r.warnings),
              r.warnings == 1 ? "" : "s", r.summary_seen ? "" : " (its report has no summary line: it stopped early)");
  for (const std::string& m : r.process_messages) std::printf("  %s\n", m.c_str());
  for (std::size_t i = 0; i < r.findings.size() && i < kShown; ++i) {
    const SanitizerFinding& f = r.findings[i];
    std::string line = "  " + f.severity + ": " + f.message;
    if (!f.function.empty()) line += ", in " + f.function;
    if (!f.where.empty()) line += " (" + f.where + ")";
    if (f.records > 1) line += ", " + std::to_string(f.records) + " records";
    if (f.hazards > 0) line += ", " + std::to_string(f.hazards) + " hazards";
    std::printf("%s\n", line.c_str());
  }
  if (r.findings.size() > kShown) {
    std::printf("  ... and %zu more (--json lists them all)\n", r.findings.size() - kShown);
  }
}

// The child's JSON with the sanitizer's report and the user's command line, onto `json`.
void write_json(const fs::path& child_json, const std::string& json, const SanitizerReport& report,
                const std::string& command_line) {
  std::ifstream in(child_json);
  Json document;
  try {
    document = Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error("--sanitize: the sanitized run's JSON report could not be read: " + std::string(e.what()));
  }
  if (!document.is_object()) throw Error("--sanitize: the sanitized run's JSON report is not an object");
  if (document.contains("command")) document["command"] = command_line;
  document["sanitizer"] = report_json(report);
  write_text_file(json, [&](std::ostream& out) { write_json_document(out, document); });
}

}  // namespace

std::string find_compute_sanitizer() {
  if (const char* named = std::getenv("FC_COMPUTE_SANITIZER"); named && *named) {
    if (!executable(named)) throw Error(std::string("FC_COMPUTE_SANITIZER=") + named + ": not an executable file");
    return named;
  }
  if (const std::string on_path = find_on_path("compute-sanitizer"); !on_path.empty()) return on_path;
  std::vector<std::string> folders;
  if (const char* cuda = std::getenv("CUDA_HOME"); cuda && *cuda) folders.push_back(std::string(cuda) + "/bin");
  folders.push_back("/usr/local/cuda/bin");
  for (const std::string& folder : folders) {
    if (executable(folder + "/compute-sanitizer")) return folder + "/compute-sanitizer";
  }
  throw Error("--sanitize: compute-sanitizer not found on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin "
              "(FC_COMPUTE_SANITIZER names it)");
}

std::vector<std::string> child_arguments(const std::vector<std::string>& arguments, const std::string& json) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string& a = arguments[i];
    if (a == "--sanitize") {
      ++i;  // its value
    } else if (a.rfind("--sanitize=", 0) == 0) {
      continue;
    } else if (a == "--json" && i + 1 < arguments.size()) {
      out.insert(out.end(), {a, json});
      ++i;
    } else if (a.rfind("--json=", 0) == 0) {
      out.push_back("--json=" + json);
    } else {
      out.push_back(a);
    }
  }
  return out;
}

int run_sanitized_trace(const std::string& tool, const std::vector<std::string>& arguments, const ReportFiles& files,
                        const std::string& snapshot, const std::string& command_line) {
  const std::string sanitizer = find_compute_sanitizer();
  const DeviceInfo device = device_info();
  if (!device.available) {
    throw Error("--sanitize: no CUDA device (" + device.why_unavailable + "): compute-sanitizer checks device code");
  }
  check_report_files(files);
  std::error_code ignored;
  if (!snapshot.empty() && !fs::is_directory(snapshot, ignored)) check_output_path(snapshot);
  const TemporaryFolder folder("flashcore-sanitize", "--sanitize");
  const fs::path log = folder.path() / "sanitizer.log", child_json = folder.path() / "report.json";
  ChildProcess child;
  child.args = {sanitizer, "--tool", tool, "--log-file", log.string(), "--print-limit", "10000",
                fs::read_symlink("/proc/self/exe").string()};
  for (const std::string& a : child_arguments(arguments, child_json.string())) child.args.push_back(a);
  // Kernels run 10 to 100 times slower under the tools (racecheck: 19x on fa1-scalar, H100):
  // the watchdog's default would call a slow run a hang. A limit the user set stays.
  const char* limit = std::getenv("FC_RUN_TIMEOUT");
  if (!limit || !*limit) child.environment.push_back("FC_RUN_TIMEOUT=" + std::to_string(kSanitizedRunTimeout));
  std::fflush(stdout);
  const int status = run_child_process(child, "--sanitize");

  std::ifstream in(log);
  if (!in) {
    throw Error("--sanitize: " + sanitizer + " exited with status " + std::to_string(status) + " and wrote no report");
  }
  const SanitizerReport report = parse_sanitizer_log(in, tool);
  print_report(report);
  if (!files.json.empty() && fs::exists(child_json)) write_json(child_json, files.json, report, command_line);
  if (status == kExitHang) return status;
  // The child ran to its end and refused or judged nothing: its own line said why.
  if (status == kExitUsage && report.summary_seen && report.process_messages.empty()) return status;
  // compute-sanitizer gives the child's status, or its own when the child did not end normally.
  if ((status != kExitPass && status != kExitDiverged) || !report.process_messages.empty() || !report.summary_seen) {
    std::string why = "exit status " + std::to_string(status);
    if (!report.process_messages.empty()) why = report.process_messages.front();
    if (!report.summary_seen) why += "; the tool's report has no summary";
    std::fprintf(stderr, "flashcore-check: the run under compute-sanitizer did not end normally (%s)\n", why.c_str());
    return kExitUsage;
  }
  return report.errors > 0 ? kExitDiverged : status;
}

}  // namespace fc

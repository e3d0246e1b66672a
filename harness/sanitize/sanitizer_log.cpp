#include "harness/sanitize/sanitizer_log.h"

#include <algorithm>
#include <map>
#include <regex>
#include <tuple>

namespace fc {
namespace {

const std::string kMarker = "========= ";

// A record as read: its first line and the indented lines after it.
struct Record {
  std::vector<std::string> lines;
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") + 1 - first);
}

// The tool's own lines that are not records: its banner and the summaries (read apart).
bool is_banner(const std::string& text) {
  return starts_with(text, "COMPUTE-SANITIZER") || starts_with(text, "Target application returned") ||
         starts_with(text, "LEAK SUMMARY") || starts_with(text, "Saved host backtrace");
}

// " at FUNCTION+0xOFFSET" (and an " in FILE:LINE" after it): FUNCTION may hold spaces,
// parentheses and template arguments, so it runs to the last "+0x" of the fragment.
const std::regex& at_function() {
  static const std::regex r(R"((?:^| )at (.+?)\+0x[0-9a-fA-F]+)");
  return r;
}
const std::regex& in_source_line() {
  static const std::regex r(R"( in ([^ \[\]]+:[0-9]+))");
  return r;
}
const std::regex& hazard_count() {
  static const std::regex r(R"(\[([0-9]+) hazards?\])");
  return r;
}

// A line of a record with its "at FUNCTION+0x.. in FILE:LINE" and "[N hazards]" cut out.
std::string without_places(const std::string& line) {
  std::string out = std::regex_replace(line, std::regex(R"((?:^| )at .+?\+0x[0-9a-fA-F]+( in [^ \[\]]+:[0-9]+)?)"), "");
  out = std::regex_replace(out, hazard_count(), "");
  out = std::regex_replace(out, std::regex(R"(0x[0-9a-fA-F]+)"), "0x...");
  return trimmed(out);
}

SanitizerFinding finding_of(const Record& record) {
  SanitizerFinding f;
  const std::string& header = record.lines.front();
  f.severity = starts_with(header, "Warning") ? "warning" : "error";
  f.message = without_places(header);
  for (const char* prefix : {"Error: ", "Warning: "}) {  // the severity says it
    if (starts_with(f.message, prefix)) f.message = f.message.substr(std::string(prefix).size());
  }
  std::vector<std::string> places, accesses;
  for (const std::string& line : record.lines) {
    if (starts_with(line, "Saved host backtrace")) break;  // host frames name host code, not the kernel
    std::smatch m;
    if (f.function.empty() && std::regex_search(line, m, at_function())) f.function = short_kernel_name(m[1].str());
    for (auto it = std::sregex_iterator(line.begin(), line.end(), in_source_line()); it != std::sregex_iterator(); ++it) {
      const std::string place = (*it)[1].str();
      if (std::find(places.begin(), places.end(), place) == places.end()) places.push_back(place);
    }
    for (auto it = std::sregex_iterator(line.begin(), line.end(), hazard_count()); it != std::sregex_iterator(); ++it) {
      f.hazards += std::stoll((*it)[1].str());
    }
    // racecheck's other accesses ("and Read access at ..."), each kind once: part of what the
    // record says.
    if (&line != &header && starts_with(line, "and ") && std::regex_search(line, at_function())) {
      const std::string access = without_places(line);
      if (std::find(accesses.begin(), accesses.end(), access) == accesses.end()) accesses.push_back(access);
    }
  }
  for (const std::string& a : accesses) f.message += " " + a;
  for (const std::string& p : places) f.where += (f.where.empty() ? "" : ", ") + p;
  f.records = 1;
  for (const std::string& line : record.lines) f.first_record += (f.first_record.empty() ? "" : "\n") + line;
  return f;
}

// "ERROR SUMMARY: 3 errors", "RACECHECK SUMMARY: 5 hazards displayed (4 errors, 1 warning)".
bool read_summary(const std::string& text, SanitizerReport& report) {
  static const std::regex error_summary(R"(^ERROR SUMMARY: ([0-9]+) errors?)");
  static const std::regex hazard_summary(R"(^RACECHECK SUMMARY: [0-9]+ hazards? displayed \(([0-9]+) errors?, ([0-9]+) warnings?\))");
  std::smatch m;
  if (std::regex_search(text, m, hazard_summary)) {
    report.errors = std::stoll(m[1].str());
    report.warnings = std::stoll(m[2].str());
    report.summary_seen = true;
    return true;
  }
  if (std::regex_search(text, m, error_summary)) {
    report.errors = std::stoll(m[1].str());
    report.summary_seen = true;
    return true;
  }
  return starts_with(text, "RACECHECK SUMMARY") || starts_with(text, "ERROR SUMMARY");
}

}  // namespace

std::string short_kernel_name(const std::string& function) {
  std::string name = trimmed(function);
  if (starts_with(name, "void ")) name = name.substr(5);
  if (!name.empty() && name.back() == ')') {  // the parameter list: from its matching '('
    int depth = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
      if (name[i] == ')') ++depth;
      if (name[i] == '(' && --depth == 0) {
        name = trimmed(name.substr(0, i));
        break;
      }
    }
  }
  return name;
}

SanitizerReport parse_sanitizer_log(std::istream& log, const std::string& tool) {
  SanitizerReport report;
  report.tool = tool;
  std::vector<Record> records;
  bool in_record = false;
  for (std::string line; std::getline(log, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!starts_with(line, kMarker)) continue;  // the application's own output, if any got here
    const std::string text = line.substr(kMarker.size());
    if (text.empty()) continue;
    if (text.front() == ' ' || text.front() == '\t') {
      if (in_record) records.back().lines.push_back(trimmed(text));
      continue;
    }
    in_record = false;
    if (is_banner(text) || read_summary(text, report)) continue;
    records.push_back({{trimmed(text)}});
    in_record = true;
  }
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::size_t> seen;
  std::int64_t errors = 0, warnings = 0;
  for (const Record& r : records) {
    SanitizerFinding f = finding_of(r);
    (f.severity == "warning" ? warnings : errors) += 1;
    const auto key = std::make_tuple(f.severity, f.message, f.function, f.where);
    const auto it = seen.find(key);
    if (it == seen.end()) {
      seen.emplace(key, report.findings.size());
      report.findings.push_back(std::move(f));
    } else {
      SanitizerFinding& g = report.findings[it->second];
      g.records += 1;
      g.hazards += f.hazards;
    }
  }
  if (!report.summary_seen) {
    report.errors = errors;
    report.warnings = warnings;
  }
  return report;
}

}  // namespace fc

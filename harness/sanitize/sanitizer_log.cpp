#include "harness/sanitize/sanitizer_log.h"

#include <algorithm>
#include <cctype>
#include <map>
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

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The tool's own lines that are not records: its banner, and what it says about the process
// rather than the device code (read apart: they make the run incomplete, not a finding).
bool is_banner(const std::string& text) {
  return starts_with(text, "COMPUTE-SANITIZER") || starts_with(text, "Target application returned") ||
         starts_with(text, "LEAK SUMMARY") || starts_with(text, "Saved host backtrace");
}
bool is_process_message(const std::string& text) {
  for (const char* m : {"Error: Target application terminated before first instrumented API call",
                        "Error: process didn't terminate successfully", "Error: No attachable process found",
                        "Error: Target application terminated", "Error: Failed to launch"}) {
    if (starts_with(text, m)) return true;
  }
  return false;
}

// "at FUNCTION+0xOFFSET", and " in FILE:LINE" after it when the code has line info. FUNCTION
// may hold spaces, parentheses and template arguments: it runs from "at " to "+0x". Plain
// searches, not a regex: a demangled name can be tens of thousands of characters, past what
// std::regex's recursion survives.
struct Place {
  std::size_t begin = 0, end = 0;  // the span, "at" to the end of the offset or the source line
  std::string function, source;
};

std::vector<Place> places_in(const std::string& line) {
  std::vector<Place> places;
  std::size_t from = 0;
  while (true) {
    const std::size_t at = line.find("at ", from);
    if (at == std::string::npos) break;
    from = at + 3;
    if (at > 0 && line[at - 1] != ' ') continue;
    const std::size_t plus = line.find("+0x", at + 3);
    if (plus == std::string::npos) break;
    if (line.find(" at ", at + 3) < plus || starts_with(line.substr(at + 3, 2), "0x")) continue;  // another "at" is nearer
    std::size_t end = plus + 3;
    while (end < line.size() && is_hex(line[end])) ++end;
    Place p;
    p.begin = at;
    p.function = line.substr(at + 3, plus - at - 3);
    if (line.compare(end, 4, " in ") == 0) {
      const std::size_t start = end + 4;
      std::size_t stop = start;
      while (stop < line.size() && line[stop] != ' ' && line[stop] != '[') ++stop;
      const std::string token = line.substr(start, stop - start);
      const std::size_t colon = token.rfind(':');
      if (colon != std::string::npos && colon + 1 < token.size() &&
          std::all_of(token.begin() + static_cast<std::ptrdiff_t>(colon) + 1, token.end(), is_digit)) {
        p.source = token;
        end = stop;
      }
    }
    p.end = end;
    places.push_back(p);
    from = end;
  }
  return places;
}

// "[N hazards]" in a racecheck line: N, summed over the line.
std::int64_t hazards_in(const std::string& line) {
  std::int64_t total = 0;
  for (std::size_t open = line.find('['); open != std::string::npos; open = line.find('[', open + 1)) {
    std::size_t i = open + 1;
    std::int64_t n = 0;
    bool digits = false;
    while (i < line.size() && is_digit(line[i]) && i - open < 19) {
      n = n * 10 + (line[i++] - '0');
      digits = true;
    }
    if (digits && (line.compare(i, 9, " hazards]") == 0 || line.compare(i, 8, " hazard]") == 0)) total += n;
  }
  return total;
}

// A line with its places and hazard counts cut out and its hexadecimal numbers blanked.
std::string without_places(const std::string& line) {
  std::string out;
  std::size_t from = 0;
  for (const Place& p : places_in(line)) {
    out += line.substr(from, p.begin - from);
    from = p.end;
  }
  out += line.substr(from);
  for (std::size_t open = out.find('['); open != std::string::npos; open = out.find('[', open)) {
    const std::size_t close = out.find(']', open);
    if (close == std::string::npos || hazards_in(out.substr(open, close + 1 - open)) == 0) {
      ++open;
      continue;
    }
    out.erase(open, close + 1 - open);
  }
  std::string blanked;
  for (std::size_t i = 0; i < out.size();) {
    if (out.compare(i, 2, "0x") == 0 && i + 2 < out.size() && is_hex(out[i + 2])) {
      blanked += "0x...";
      i += 2;
      while (i < out.size() && is_hex(out[i])) ++i;
    } else {
      blanked += out[i++];
    }
  }
  // "Write access  and" where a place was cut: one space between words.
  std::string single;
  for (char c : blanked) {
    if (!(c == ' ' && !single.empty() && single.back() == ' ')) single += c;
  }
  return trimmed(single);
}

SanitizerFinding finding_of(const Record& record) {
  SanitizerFinding f;
  const std::string& header = record.lines.front();
  f.severity = starts_with(header, "Warning") ? "warning" : "error";
  f.message = without_places(header);
  for (const char* prefix : {"Error: ", "Warning: "}) {  // the severity says it
    if (starts_with(f.message, prefix)) f.message = f.message.substr(std::string(prefix).size());
  }
  std::vector<std::string> sources, accesses;
  for (const std::string& line : record.lines) {
    if (starts_with(line, "Saved host backtrace")) break;  // host frames name host code, not the kernel
    const std::vector<Place> places = places_in(line);
    for (const Place& p : places) {
      // A device-side assert is reported in __assertfail: the function that asserted is the next frame.
      const std::string name = short_kernel_name(p.function);
      if (f.function.empty() && name != "__assertfail") f.function = name;
      if (!p.source.empty() && std::find(sources.begin(), sources.end(), p.source) == sources.end()) {
        sources.push_back(p.source);
      }
    }
    f.hazards += hazards_in(line);
    // racecheck's other accesses ("and Read access at ..."), each kind once: part of what the
    // record says.
    if (&line != &header && starts_with(line, "and ") && !places.empty()) {
      const std::string access = without_places(line);
      if (std::find(accesses.begin(), accesses.end(), access) == accesses.end()) accesses.push_back(access);
    }
  }
  for (const std::string& a : accesses) f.message += " " + a;
  for (const std::string& s : sources) f.where += (f.where.empty() ? "" : ", ") + s;
  f.records = 1;
  for (const std::string& line : record.lines) f.first_record += (f.first_record.empty() ? "" : "\n") + line;
  return f;
}

// "ERROR SUMMARY: 3 errors" (not its "ERROR SUMMARY: 30 errors were not printed" after it),
// "RACECHECK SUMMARY: 5 hazards displayed (4 errors, 1 warning)". A number from digits alone.
bool read_count(const std::string& text, std::size_t& at, std::int64_t& n) {
  if (at >= text.size() || !is_digit(text[at])) return false;
  n = 0;
  while (at < text.size() && is_digit(text[at]) && n < (std::int64_t{1} << 58)) n = n * 10 + (text[at++] - '0');
  return true;
}

bool read_summary(const std::string& text, SanitizerReport& report) {
  const std::string error_summary = "ERROR SUMMARY: ", hazard_summary = "RACECHECK SUMMARY: ";
  if (starts_with(text, hazard_summary)) {
    const std::size_t open = text.find('(');
    std::size_t at = open == std::string::npos ? text.size() : open + 1;
    std::int64_t errors = 0, warnings = 0;
    if (read_count(text, at, errors)) {
      const std::size_t comma = text.find(", ", at);
      at = comma == std::string::npos ? text.size() : comma + 2;
      if (read_count(text, at, warnings)) {
        report.errors = errors;
        report.warnings = warnings;
        report.summary_seen = true;
      }
    }
    return true;
  }
  if (starts_with(text, error_summary)) {
    std::size_t at = error_summary.size();
    std::int64_t errors = 0;
    const std::string rest = trimmed(text.substr(std::min(text.size(), at)));
    at = 0;
    if (read_count(rest, at, errors) && (rest.substr(at) == " errors" || rest.substr(at) == " error")) {
      report.errors = errors;
      report.summary_seen = true;
    }
    return true;
  }
  return false;
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
    if (is_process_message(text)) {
      report.process_messages.push_back(trimmed(text));
      continue;
    }
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

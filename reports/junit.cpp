#include "reports/junit.h"

#include <cstdio>
#include <sstream>

#include "reports/table.h"

namespace fc {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') out += ' '; else out += c;
    }
  }
  return out;
}

JunitCase junit_case(const CaseResult& result, const std::string& classname, const std::string& name) {
  JunitCase c;
  c.classname = classname;
  c.name = name;
  c.seconds = result.seconds;
  switch (result.verdict) {
    case Verdict::pass: c.status = JunitCase::Status::passed; break;
    case Verdict::skipped:
      c.status = JunitCase::Status::skipped;
      c.message = result.reason;
      break;
    case Verdict::error:
      c.status = JunitCase::Status::error;
      c.message = result.reason;
      break;
    case Verdict::diverged: {
      c.status = JunitCase::Status::failed;
      const Divergence& d = *result.divergence;
      c.message = d.output + " at " + index_string(d.index) + ": " + d.cause + ": " + d.evidence;
      std::ostringstream details;
      write_case_table(details, result);
      c.details = details.str();
      break;
    }
  }
  return c;
}

void write_junit(std::ostream& out, const std::string& suite, const std::vector<JunitCase>& cases) {
  int failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  for (const JunitCase& c : cases) {
    failures += c.status == JunitCase::Status::failed;
    errors += c.status == JunitCase::Status::error;
    skipped += c.status == JunitCase::Status::skipped;
    seconds += c.seconds;
  }
  char time[32];
  std::snprintf(time, sizeof time, "%.3f", seconds);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"flashcore-check\" tests=\"" << cases.size() << "\" failures=\"" << failures
      << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\"" << time << "\">\n";
  out << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << cases.size() << "\" failures=\"" << failures
      << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\"" << time << "\">\n";
  for (const JunitCase& c : cases) {
    std::snprintf(time, sizeof time, "%.3f", c.seconds);
    out << "    <testcase classname=\"" << xml_escape(c.classname) << "\" name=\"" << xml_escape(c.name)
        << "\" time=\"" << time << "\"";
    switch (c.status) {
      case JunitCase::Status::passed: out << "/>\n"; continue;
      case JunitCase::Status::failed:
        out << ">\n      <failure message=\"" << xml_escape(c.message) << "\" type=\"diverged\">"
            << xml_escape(c.details) << "</failure>\n";
        break;
      case JunitCase::Status::error:
        out << ">\n      <error message=\"" << xml_escape(c.message) << "\" type=\"error\"/>\n";
        break;
      case JunitCase::Status::skipped:
        out << ">\n      <skipped message=\"" << xml_escape(c.message) << "\"/>\n";
        break;
    }
    out << "    </testcase>\n";
  }
  out << "  </testsuite>\n</testsuites>\n";
}

}  // namespace fc

#include "reports/junit.h"

#include <cstdio>
#include <pugixml.hpp>
#include <sstream>

#include "reports/table.h"

namespace fc {
namespace {

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds);
  return text;
}

// The counts every JUnit reader shows, on <testsuites> and <testsuite> alike.
void set_counts(pugi::xml_node node, const std::vector<JunitCase>& cases) {
  int failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  for (const JunitCase& c : cases) {
    failures += c.status == JunitCase::Status::failed;
    errors += c.status == JunitCase::Status::error;
    skipped += c.status == JunitCase::Status::skipped;
    seconds += c.seconds;
  }
  node.append_attribute("tests") = static_cast<unsigned long long>(cases.size());
  node.append_attribute("failures") = failures;
  node.append_attribute("errors") = errors;
  node.append_attribute("skipped") = skipped;
  node.append_attribute("time") = seconds_text(seconds).c_str();
}

void add_testcase(pugi::xml_node suite, const JunitCase& c) {
  pugi::xml_node node = suite.append_child("testcase");
  node.append_attribute("classname") = c.classname.c_str();
  node.append_attribute("name") = c.name.c_str();
  node.append_attribute("time") = seconds_text(c.seconds).c_str();
  switch (c.status) {
    case JunitCase::Status::passed: return;
    case JunitCase::Status::failed: {
      pugi::xml_node failure = node.append_child("failure");
      failure.append_attribute("message") = c.message.c_str();
      failure.append_attribute("type") = "diverged";
      failure.text() = c.details.c_str();
      return;
    }
    case JunitCase::Status::error: {
      pugi::xml_node error = node.append_child("error");
      error.append_attribute("message") = c.message.c_str();
      error.append_attribute("type") = "error";
      return;
    }
    case JunitCase::Status::skipped:
      node.append_child("skipped").append_attribute("message") = c.message.c_str();
      return;
  }
}

}  // namespace

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
  pugi::xml_document document;
  pugi::xml_node declaration = document.append_child(pugi::node_declaration);
  declaration.append_attribute("version") = "1.0";
  declaration.append_attribute("encoding") = "UTF-8";
  pugi::xml_node suites = document.append_child("testsuites");
  suites.append_attribute("name") = "flashcore-check";
  set_counts(suites, cases);
  pugi::xml_node testsuite = suites.append_child("testsuite");
  testsuite.append_attribute("name") = suite.c_str();
  set_counts(testsuite, cases);
  for (const JunitCase& c : cases) add_testcase(testsuite, c);
  // XML 1.0 allows no control character but tab, newline and carriage return, not even
  // as a character reference: pugixml drops the others.
  document.save(out, "  ", pugi::format_indent | pugi::format_skip_control_chars, pugi::encoding_utf8);
}

}  // namespace fc

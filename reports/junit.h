#pragma once
// JUnit XML, the format CI systems show natively: one testcase per judged item, the
// pinpoint of a divergence as the failure message.
#include <ostream>
#include <string>
#include <vector>

#include "reports/case_result.h"

namespace fc {

struct JunitCase {
  std::string name, classname;
  enum class Status { passed, failed, error, skipped } status = Status::passed;
  std::string message;  // one line
  std::string details;  // the pinpoint, the table
  double seconds = 0;
};

// A test case from a judged case: failed on divergence, error on a failed run.
JunitCase junit_case(const CaseResult& result, const std::string& classname, const std::string& name);

// The document, through pugixml: escaping is its job, and characters XML 1.0 cannot hold
// (control characters other than tab, newline, carriage return) are left out.
void write_junit(std::ostream& out, const std::string& suite, const std::vector<JunitCase>& cases);

}  // namespace fc

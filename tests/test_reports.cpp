// The report writers: JSON (nlohmann-json) and JUnit XML (pugixml) read back by the same
// libraries, so that what a consumer parses is checked, not the text we meant to write.
#include <unistd.h>

#include <cmath>
#include <limits>
#include <pugixml.hpp>
#include <sstream>

#include "catch.h"
#include "core/resource_usage.h"
#include "core/json.h"
#include "reports/json_report.h"
#include "reports/junit.h"

namespace fc {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A diverged case whose numbers are NaN and infinite where real ones are, and whose text
// fields spell "nan": the two must stay apart in the JSON.
CaseResult case_with_nonfinite_numbers() {
  CaseResult c;
  c.impl = "cpu-emulated";
  c.description.label = "nan";
  c.description.mask = "nan";
  c.description.scale = 0.125;
  c.verdict = Verdict::diverged;
  OutputResult r;
  r.name = r.stage_name = "softmax";
  r.kind = StageKind::softmax;
  r.dims = {1, 1, 4, 4};
  r.present = r.compared = true;
  r.end_to_end.max_normalized_error = kInf;
  r.end_to_end.over_bound = 1;
  r.end_to_end.first_failure = ElementReport{{0, 0, 3, 1}, kNaN, 0.25, 1e-3};
  r.local = r.end_to_end;
  c.outputs.push_back(r);
  Divergence d;
  d.stage = d.output = "softmax";
  d.kind = "softmax";
  d.index = {0, 0, 3, 1};
  d.cause = "fully-masked-row";
  d.evidence = "a <row> & \"its\" keys\x01";
  d.kernel = kNaN;
  d.reference = 0.0;
  d.bound = 1e-3;
  d.row = RowContext{-kInf, 0, 0, 4};
  c.divergence = d;
  return c;
}

Json report_of(const std::vector<CaseResult>& cases) {
  std::ostringstream out;
  write_json_report(out, RunInfo{"0.1.0", "flashcore-check --trace", "none", {}}, cases);
  return Json::parse(out.str());
}

}  // namespace

TEST_CASE("non-finite numbers are written as {\"nonfinite\": ...}, never as strings or null", "[reports]") {
  const Json report = report_of({case_with_nonfinite_numbers()});
  CHECK(report["json_schema"] == 4);
  const Json& c = report["cases"][0];
  const Json& d = c["first_divergence"];
  CHECK(d["kernel"] == Json{{"nonfinite", "nan"}});
  CHECK(d["reference"] == 0.0);
  CHECK(d["row"]["max"] == Json{{"nonfinite", "-inf"}});
  CHECK(c["stages"][0]["end_to_end"]["max_normalized_error"] == Json{{"nonfinite", "inf"}});
  CHECK(c["stages"][0]["end_to_end"]["first_failure"]["kernel"] == Json{{"nonfinite", "nan"}});
  // A text field holding the word stays a string: a reader can tell the two apart.
  CHECK(c["case"]["mask"] == "nan");
  CHECK(c["case"]["mask"].is_string());
  CHECK(d["evidence"] == "a <row> & \"its\" keys\x01");
}

TEST_CASE("json_number writes finite values as numbers and each non-finite kind by name", "[reports]") {
  CHECK(json_number(1.5) == 1.5);
  CHECK(json_number(-0.0).is_number());
  CHECK(json_number(kNaN) == Json{{"nonfinite", "nan"}});
  CHECK(json_number(kInf) == Json{{"nonfinite", "inf"}});
  CHECK(json_number(-kInf) == Json{{"nonfinite", "-inf"}});
  // Bytes that are not UTF-8 do not stop the report: they become U+FFFD.
  CHECK(json_text(Json{{"path", std::string("a\xff.h5")}}).find("a\xef\xbf\xbd.h5") != std::string::npos);
}

TEST_CASE("JUnit XML parses back with every message intact, markup escaped and control characters left out",
          "[reports]") {
  std::vector<JunitCase> cases = {junit_case(case_with_nonfinite_numbers(), "flashcore-check.trace.cpu", "a&b")};
  JunitCase error;
  error.name = "broken";
  error.classname = "flashcore-check.trace.naive";
  error.status = JunitCase::Status::error;
  error.message = "no CUDA device <here>";
  cases.push_back(error);
  std::ostringstream out;
  write_junit(out, "trace", cases);

  pugi::xml_document document;
  const pugi::xml_parse_result parsed = document.load_string(out.str().c_str());
  INFO(out.str());
  REQUIRE(parsed);
  const pugi::xml_node suite = document.child("testsuites").child("testsuite");
  CHECK(std::string(suite.attribute("tests").value()) == "2");
  CHECK(std::string(suite.attribute("failures").value()) == "1");
  CHECK(std::string(suite.attribute("errors").value()) == "1");
  const pugi::xml_node failed = suite.find_child_by_attribute("testcase", "name", "a&b");
  REQUIRE(failed);
  CHECK(std::string(failed.child("failure").attribute("message").value()) ==
        "softmax at (0,0,3,1): fully-masked-row: a <row> & \"its\" keys");
  CHECK(std::string(failed.child("failure").text().get()).find("softmax") != std::string::npos);
  CHECK(std::string(suite.find_child_by_attribute("testcase", "name", "broken").child("error").attribute("message").value()) ==
        "no CUDA device <here>");
}

}  // namespace fc

namespace fc {

TEST_CASE("the report says what the run held at its peak: host RSS and the harness's device memory", "[reports]") {
  std::ostringstream out;
  write_json_report(out, RunInfo{"0.1.0", "flashcore-check --trace", "none", {}, peak_host_rss_bytes(), 3 << 20}, {});
  const Json report = Json::parse(out.str());
  CHECK(report["resources"]["peak_host_rss_bytes"].get<std::int64_t>() > (1 << 20));  // this process holds more than 1 MiB
  CHECK(report["resources"]["peak_device_bytes"] == 3 << 20);
}

TEST_CASE("the host's available memory is read: more than a few MiB, no more than the machine has", "[reports]") {
  const std::int64_t available = available_host_bytes();
  const std::int64_t physical = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  CHECK(available > (std::int64_t{16} << 20));
  CHECK(available <= physical);
}

TEST_CASE("device allocations are counted at their peak, frees included", "[reports]") {
  const std::int64_t before = peak_device_bytes();
  count_device_allocation(std::int64_t{5} << 40);  // far above anything a test holds
  count_device_allocation(-(std::int64_t{5} << 40));
  CHECK(peak_device_bytes() >= (std::int64_t{5} << 40));
  CHECK(peak_device_bytes() >= before);
  count_device_allocation(std::int64_t{1} << 20);  // now far below the peak: the peak stays
  CHECK(peak_device_bytes() >= (std::int64_t{5} << 40));
  count_device_allocation(-(std::int64_t{1} << 20));
}

}  // namespace fc

namespace fc {

TEST_CASE("a case traced in windows of rows says so in the JSON, and a whole one has no such field", "[reports]") {
  CaseResult windowed = case_with_nonfinite_numbers(), whole = windowed;
  windowed.window_rows = 2304;
  const Json report = report_of({windowed, whole});
  CHECK(report["cases"][0]["window_rows"] == 2304);
  CHECK_FALSE(report["cases"][1].contains("window_rows"));
}

TEST_CASE("a profiled case lists its evaluation steps in the JSON, in order, and another none", "[reports][profile]") {
  CaseResult profiled = case_with_nonfinite_numbers(), plain = profiled;
  profiled.evaluation_steps = {{"end-to-end references", 2.5}, {"comparisons", 0.25}};
  const Json report = report_of({profiled, plain});
  const Json& steps = report["cases"][0]["seconds_by_evaluation_step"];
  REQUIRE(steps.size() == 2);
  CHECK(steps[0]["step"] == "end-to-end references");
  CHECK(steps[0]["seconds"] == 2.5);
  CHECK(steps[1]["step"] == "comparisons");
  CHECK_FALSE(report["cases"][1].contains("seconds_by_evaluation_step"));
}

}  // namespace fc

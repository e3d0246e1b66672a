#include "harness/html/html_builder.h"

#include "harness/io/text_output.h"
#include "harness/version.h"
#include "stages/device_info.h"

namespace fc {

HtmlReportBuilder::HtmlReportBuilder(std::string path, const std::string& title, const std::string& command,
                                     FigureOptions options)
    : path_(std::move(path)), options_(std::move(options)) {
  if (!enabled()) return;
  report_.title = title;
  report_.command = command;
  report_.version = tool_version();
  report_.device = device_info().describe();
}

std::string HtmlReportBuilder::add_case(const AttentionInputs& inputs, const TraceRun& run, const CaseResult& result,
                                        const std::vector<OutputReferences>& references, const std::string& context) {
  if (!enabled()) return "";
  return add(case_figures(inputs, run, result, references, options_), context);
}

std::string HtmlReportBuilder::add_result(const CaseResult& result, const std::string& context) {
  if (!enabled()) return "";
  HtmlCase c;
  c.result = result;
  return add(std::move(c), context);
}

std::string HtmlReportBuilder::add(HtmlCase c, const std::string& context) {
  c.id = "case-" + std::to_string(report_.cases.size() + 1);
  c.context = context;
  report_.cases.push_back(std::move(c));
  return report_.cases.back().id;
}

void HtmlReportBuilder::add_summary(HtmlSummary section) {
  if (enabled()) report_.summary.push_back(std::move(section));
}

void HtmlReportBuilder::write() const {
  if (enabled()) write_text_file(path_, [&](std::ostream& out) { write_html_report(out, report_); });
}

}  // namespace fc

#pragma once
// The HTML report of one command, collected while it runs and written once at the end
// (whole or not at all). A case's figures are drawn when it is added, so no run's tensors
// have to outlive its case. Every judging command takes it the same way: add each judged
// run (with its run and references) or result, add summary tables and charts, write.
#include <string>
#include <vector>

#include "harness/html/case_figures.h"
#include "reports/html_report.h"

namespace fc {

class HtmlReportBuilder {
 public:
  // `path` empty: the report is off and every call does nothing.
  HtmlReportBuilder(std::string path, const std::string& title, const std::string& command, FigureOptions options);

  bool enabled() const { return !path_.empty(); }

  // A judged run with its figures; returns the id of its section ("" when off).
  std::string add_case(const AttentionInputs& inputs, const TraceRun& run, const CaseResult& result,
                       const std::vector<OutputReferences>& references, const std::string& context = "");
  // A result whose run is not at hand: its table and pinpoint only.
  std::string add_result(const CaseResult& result, const std::string& context = "");
  // Tables and charts shown above the cases, in the order added.
  void add_summary(HtmlSummary section);

  void write() const;

 private:
  std::string add(HtmlCase c, const std::string& context);

  std::string path_;
  FigureOptions options_;
  HtmlReport report_;
};

}  // namespace fc

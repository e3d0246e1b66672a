#pragma once
// The HTML report: one self-contained file (inline CSS, images as data: URIs, plots as
// inline SVG, no script, nothing fetched) that opens from a CI artifact. Summary sections
// (tables such as the fault detection matrix, charts such as a detection rate against Sk)
// come first, then an index of the cases and, for each case x implementation, its stage
// table with the first divergence, the pinpoint, heatmaps, per-row plots and cuBLASLt
// descriptors. Commands fill an HtmlReport (harness/html/html_builder.h does it from
// judged runs) and write it once at the end.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "reports/case_result.h"
#include "reports/heatmap.h"

namespace fc {

// The element a heatmap marks, and where it sits in the image's source grid.
struct HtmlMarker {
  Index4 index;               // (b, h, row, col) as every report prints it
  std::int64_t x = 0, y = 0;  // source column and row of the image
  bool first_divergence = false;
};

// One image: a layer of one head (or, for a per-row quantity, of rows x heads).
struct HtmlImage {
  Layer layer = Layer::error;
  std::int64_t b = -1, h = -1;  // the head; -1 when the image's columns are the heads
  std::string x_axis;           // what the source columns are: "key", "dim" or "head"
  std::int64_t x_offset = 0;    // key (or dim) of source column 0: a tile's first key
  std::int64_t heads = 0;       // H, to place (b, h) on a "head" axis: column b*H + h
  PoolGeometry geometry;
  std::string png;
  std::int64_t count = 0;       // elements over bound (error layer) or in the mask
  std::optional<HtmlMarker> marker;
};

struct HtmlHeatmaps {
  std::string output;      // "qk[9]"
  std::string why;         // "first divergence" or "asked for"
  std::string comparison;  // "stage-local" or "end-to-end"; empty without a reference (masks only)
  std::string note;        // what is missing, e.g. "not captured"
  std::vector<HtmlImage> images;
};

struct HtmlRowPlots {
  std::int64_t b = 0, h = 0;
  std::vector<std::string> svgs;  // row max, row sum, lse (reports/row_plot.h)
};

struct HtmlCase {
  std::string id;       // the section's element id, unique in the report
  std::string context;  // what this run was, when the command says more than the case
  CaseResult result;
  std::vector<HtmlHeatmaps> heatmaps;
  std::string row_source;  // where the kernel's row values come from, or why there are none
  std::vector<HtmlRowPlots> rows;
  std::string descriptors;  // cuBLASLt calls with their lint findings (reports/descriptors.h)
};

struct HtmlCell {
  HtmlCell(std::string text_ = "", std::string css_ = "", std::string href_ = "")
      : text(std::move(text_)), css(std::move(css_)), href(std::move(href_)) {}
  HtmlCell& with(const std::string& name, const std::string& value) {  // a data-NAME attribute
    data.emplace_back(name, value);
    return *this;
  }

  std::string text;
  std::string css;   // "ok", "bad"
  std::string href;  // a link, e.g. "#case-3"
  std::vector<std::pair<std::string, std::string>> data;
};

struct HtmlTable {
  std::string id, title, caption;
  std::vector<std::string> header;
  std::vector<std::vector<HtmlCell>> rows;
};

struct HtmlSeries {
  std::string name;
  std::vector<double> y;  // one per x; NaN leaves a gap
};

// A line chart (e.g. detection rate against Sk), drawn as SVG with its numbers as a table.
struct HtmlChart {
  std::string id, title, caption, x_label, y_label;
  bool log_x = false;
  std::vector<double> x;
  std::vector<HtmlSeries> series;
};

using HtmlSummary = std::variant<HtmlTable, HtmlChart>;

struct HtmlReport {
  std::string title;    // "flashcore-check trace"
  std::string command;  // the command line
  std::string version, device;
  std::vector<HtmlSummary> summary;
  std::vector<HtmlCase> cases;
};

void write_html_report(std::ostream& out, const HtmlReport& report);

// Element id of a case's first-divergence marker (for links and the browser test).
std::string marker_id(const HtmlCase& c);

}  // namespace fc

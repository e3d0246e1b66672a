#include "reports/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/numeric.h"
#include "reports/data_uri.h"
#include "reports/html_text.h"
#include "reports/table.h"

namespace fc {
namespace {

// Small heatmaps are enlarged to about this many CSS pixels a side (whole pixels per cell).
constexpr std::int64_t kDisplaySide = 256;
// Row plots of more heads than this are folded under a <details>.
constexpr std::size_t kOpenRowPlots = 4;

const char* kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#1b1b1b;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-top:2px solid #ccc;padding-top:10px}
h3{font-size:15px;margin:16px 0 6px}h4{font-size:14px;margin:10px 0 4px}
code,pre{font:12px/1.35 ui-monospace,monospace}pre{background:#f6f6f6;padding:8px;overflow-x:auto}
.meta{color:#555;margin:0 0 12px}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #d4d4d4;padding:2px 8px;text-align:right}
th{background:#f0f0f0;text-align:left}td:first-child{text-align:left}td.text{text-align:left}
tr.fail td{background:#fff1f0}tr.first td{background:#ffd9d4;font-weight:600}
td.ok,span.ok{color:#1a7f37}td.bad,span.bad{color:#c62828;font-weight:600}
.verdict{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;background:#1a7f37}
.verdict.diverged,.verdict.error{background:#c62828}.verdict.skipped{background:#777}
.pinpoint{border-left:4px solid #c62828;background:#fff7f6;padding:4px 12px;margin:8px 0}
.pinpoint p{margin:3px 0}.evidence{font-style:italic}
.heatgrid{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start}
figure.heatmap{margin:0}figure.heatmap figcaption{font-size:12px;color:#444;max-width:300px}
.frame{position:relative;border:1px solid #999;line-height:0}
.frame img{image-rendering:pixelated;display:block}
.marker{position:absolute;width:14px;height:14px;margin:-9px 0 0 -9px;border:2px solid #00a0ff;border-radius:50%;
box-shadow:0 0 0 1px #fff;pointer-events:none}
.marker.first{border-color:#00d060;width:18px;height:18px;margin:-11px 0 0 -11px}
.legend{font-size:12px;margin:4px 0}.swatch{display:inline-block;width:12px;height:12px;border:1px solid #bbb;
vertical-align:middle}
.rowplots{display:flex;flex-wrap:wrap;gap:8px}
svg.rowplot .title{font-size:12px;font-weight:600}svg.rowplot .tick{font-size:10px;fill:#555}
svg.rowplot .axis{fill:none;stroke:#bbb}svg.rowplot .ref{fill:#4a78b0;fill-opacity:.25;stroke:#4a78b0;stroke-width:1.5}
svg.rowplot .kernel{fill:#e8711a;fill-opacity:.25;stroke:#e8711a;stroke-width:1;stroke-dasharray:3 2}
svg.rowplot .bad{stroke:#d00;stroke-width:2}
.key-ref{color:#4a78b0;font-weight:600}.key-kernel{color:#e8711a;font-weight:600}
svg.chart text{font-size:11px}svg.chart .axis{stroke:#888;fill:none}svg.chart .grid{stroke:#e4e4e4}
.lint{color:#c62828;font-weight:600}
)";

std::string attr(const std::string& name, const std::string& value) { return " " + name + "=\"" + html_escape(value) + "\""; }
std::string attr(const std::string& name, std::int64_t value) { return attr(name, std::to_string(value)); }

std::string number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

std::string index_attrs(const Index4& i) {
  return attr("data-b", i.b) + attr("data-h", i.h) + attr("data-row", i.row) + attr("data-col", i.col);
}

void write_table(std::ostream& out, const HtmlTable& t) {
  out << "<section class=\"summary-table\"" << (t.id.empty() ? "" : attr("id", t.id)) << ">\n";
  if (!t.title.empty()) out << "<h2>" << html_escape(t.title) << "</h2>\n";
  if (!t.caption.empty()) out << "<p>" << html_escape(t.caption) << "</p>\n";
  out << "<table><thead><tr>";
  for (const std::string& h : t.header) out << "<th>" << html_escape(h) << "</th>";
  out << "</tr></thead><tbody>\n";
  for (const std::vector<HtmlCell>& row : t.rows) {
    out << "<tr>";
    for (const HtmlCell& c : row) {
      out << "<td class=\"text" << (c.css.empty() ? "" : " " + html_escape(c.css)) << "\"";
      for (const auto& [name, value] : c.data) out << attr("data-" + name, value);
      out << ">";
      if (!c.href.empty()) out << "<a" << attr("href", c.href) << ">";
      out << html_escape(c.text);
      if (!c.href.empty()) out << "</a>";
      out << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</tbody></table>\n</section>\n";
}

void write_chart(std::ostream& out, const HtmlChart& c) {
  static const char* kColors[] = {"#4a78b0", "#e8711a", "#2e9d4a", "#c62828", "#8a5cb8", "#6b6b6b"};
  constexpr int kWidth = 560, kHeight = 300, kLeft = 56, kRight = 16, kTop = 16, kBottom = 44;
  out << "<section class=\"summary-chart\"" << (c.id.empty() ? "" : attr("id", c.id)) << ">\n";
  if (!c.title.empty()) out << "<h2>" << html_escape(c.title) << "</h2>\n";
  if (!c.caption.empty()) out << "<p>" << html_escape(c.caption) << "</p>\n";
  auto xv = [&](double x) { return c.log_x ? std::log10(x) : x; };
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = 0, y_hi = -INFINITY;
  for (double x : c.x) {
    if (c.log_x && !(x > 0)) continue;
    x_lo = std::min(x_lo, xv(x));
    x_hi = std::max(x_hi, xv(x));
  }
  for (const HtmlSeries& s : c.series) {
    for (double y : s.y) {
      if (!std::isfinite(y)) continue;
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
  if (!(x_hi > x_lo)) {
    x_lo -= 1;
    x_hi += 1;
  }
  if (!(y_hi > y_lo)) y_hi = y_lo + 1;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (xv(x) - x_lo) / (x_hi - x_lo) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - y_lo) / (y_hi - y_lo) * ph; };

  out << "<svg class=\"chart\"" << attr("width", kWidth) << attr("height", kHeight)
      << " role=\"img\"" << attr("aria-label", c.title) << ">";
  out << "<rect class=\"axis\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph << "\"/>";
  for (double x : c.x) {
    if (c.log_x && !(x > 0)) continue;
    out << "<line class=\"grid\" x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << kTop << "\" y2=\"" << kTop + ph
        << "\"/><text x=\"" << px(x) << "\" y=\"" << kTop + ph + 14 << "\" text-anchor=\"middle\">" << number_text(x)
        << "</text>";
  }
  out << "<text x=\"" << kLeft - 6 << "\" y=\"" << kTop + 8 << "\" text-anchor=\"end\">" << number(y_hi) << "</text>";
  out << "<text x=\"" << kLeft - 6 << "\" y=\"" << kTop + ph << "\" text-anchor=\"end\">" << number(y_lo) << "</text>";
  out << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kHeight - 6 << "\" text-anchor=\"middle\">"
      << html_escape(c.x_label) << (c.log_x ? " (log scale)" : "") << "</text>";
  out << "<text x=\"12\" y=\"" << kTop + ph / 2 << "\" transform=\"rotate(-90 12 " << kTop + ph / 2
      << ")\" text-anchor=\"middle\">" << html_escape(c.y_label) << "</text>";
  for (std::size_t s = 0; s < c.series.size(); ++s) {
    const HtmlSeries& series = c.series[s];
    const char* color = kColors[s % 6];
    std::ostringstream path;
    bool pen_down = false;
    for (std::size_t i = 0; i < c.x.size() && i < series.y.size(); ++i) {
      if (!std::isfinite(series.y[i]) || (c.log_x && !(c.x[i] > 0))) {
        pen_down = false;
        continue;
      }
      path << (pen_down ? "L" : "M") << px(c.x[i]) << "," << py(series.y[i]);
      pen_down = true;
      out << "<circle cx=\"" << px(c.x[i]) << "\" cy=\"" << py(series.y[i]) << "\" r=\"3\" fill=\"" << color
          << "\"><title>" << html_escape(series.name) << ": " << number_text(series.y[i]) << " at "
          << number_text(c.x[i]) << "</title></circle>";
    }
    out << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\"/>";
    out << "<text x=\"" << kLeft + 8 << "\" y=\"" << kTop + 14 + 14 * s << "\" fill=\"" << color << "\">"
        << html_escape(series.name) << "</text>";
  }
  out << "</svg>\n";

  out << "<table><thead><tr><th>" << html_escape(c.x_label) << "</th>";
  for (const HtmlSeries& s : c.series) out << "<th>" << html_escape(s.name) << "</th>";
  out << "</tr></thead><tbody>";
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    out << "<tr><td>" << number_text(c.x[i]) << "</td>";
    for (const HtmlSeries& s : c.series) out << "<td>" << (i < s.y.size() ? number_text(s.y[i]) : "") << "</td>";
    out << "</tr>";
  }
  out << "</tbody></table>\n</section>\n";
}

std::string divergence_text(const CaseResult& r) {
  if (!r.divergence) return r.reason.empty() ? "-" : r.reason;
  return r.divergence->output + " " + index_string(r.divergence->index) + " " + r.divergence->cause;
}

void write_index(std::ostream& out, const std::vector<HtmlCase>& cases) {
  out << "<section class=\"index\"><h2>Cases</h2>\n<table><thead><tr><th>#</th><th>implementation</th><th>case</th>"
         "<th>verdict</th><th>first divergence</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CaseResult& r = cases[i].result;
    out << "<tr><td><a" << attr("href", "#" + cases[i].id) << ">" << i + 1 << "</a></td><td class=\"text\">"
        << html_escape(r.impl) << "</td><td class=\"text\">" << html_escape(r.description.label)
        << (cases[i].context.empty() ? "" : " (" + html_escape(cases[i].context) + ")") << "</td><td class=\"text "
        << (r.verdict == Verdict::pass ? "ok" : r.verdict == Verdict::skipped ? "" : "bad") << "\">"
        << verdict_name(r.verdict) << "</td><td class=\"text\">" << html_escape(divergence_text(r)) << "</td></tr>\n";
  }
  out << "</tbody></table></section>\n";
}

void write_stage_table(std::ostream& out, const HtmlCase& c) {
  const CaseResult& r = c.result;
  out << "<table class=\"stages\"><thead><tr><th>stage output</th><th>NaN</th><th>Inf</th><th>unwritten</th>"
         "<th>max abs err</th><th>err/bound</th><th>err/tight</th><th>local</th><th>over</th><th>first bad (b,h,row,col)</th>"
         "<th>verdict</th></tr></thead><tbody>\n";
  for (const OutputResult& o : r.outputs) {
    const bool first = r.divergence && r.divergence->output == o.name;
    out << "<tr" << (first ? " class=\"fail first\"" + attr("id", c.id + "-first") : o.passed() ? "" : " class=\"fail\"")
        << "><td>" << html_escape(o.name) << "</td><td>" << o.flags.nan << "</td><td>"
        << o.flags.pos_inf + o.flags.neg_inf << "</td><td>" << o.flags.unwritten << "</td>";
    if (o.compared) {
      out << "<td>" << number(o.end_to_end.max_abs_error) << "</td><td>" << number(o.end_to_end.max_normalized_error)
          << "</td><td>" << number(o.end_to_end.max_tight_error) << "</td><td>" << number(o.local.max_tight_error)
          << "</td><td>" << o.end_to_end.failures() << "</td>";
    } else {
      out << "<td>-</td><td>-</td><td>-</td><td>-</td><td>-</td>";
    }
    out << "<td>" << html_escape(first_bad_text(o)) << "</td><td class=\"" << (o.passed() ? "ok\">pass" : "bad\">FAIL")
        << "</td></tr>\n";
  }
  out << "</tbody></table>\n";
}

void write_pinpoint_html(std::ostream& out, const Divergence& d) {
  out << "<div class=\"pinpoint\"><p><b>first divergence:</b> " << html_escape(d.output) << " (" << html_escape(d.kind);
  if (d.split >= 0) out << ", split " << d.split;
  if (d.page >= 0) out << ", page " << d.page;
  out << ") at (b,h,row,col) <code>" << index_string(d.index) << "</code></p>\n";
  out << "<p>cause: <code>" << html_escape(d.cause) << "</code></p>\n";
  out << "<p class=\"evidence\">" << html_escape(d.evidence) << "</p>\n";
  if (d.kernel) {
    out << "<p>kernel " << number(*d.kernel) << ", reference " << number(d.reference.value_or(NAN)) << ", bound "
        << number(d.bound.value_or(NAN)) << " (" << (d.stage_local ? "stage-local" : "end-to-end") << " comparison)</p>\n";
  }
  if (d.row) {
    out << "<p>row: max " << number(d.row->row_max) << ", sum " << number(d.row->row_sum) << ", " << d.row->attended
        << " of " << d.row->keys << " keys attended" << (d.row->masked() ? " (fully masked)" : "") << "</p>\n";
  }
  out << "</div>\n";
}

void write_legend(std::ostream& out, Layer layer) {
  out << "<div class=\"legend\"" << attr("data-layer", layer_name(layer)) << "><b>" << layer_name(layer) << ":</b> ";
  for (const Swatch& s : swatches(layer)) {
    out << "<span class=\"swatch" << (s.alarm ? " alarm" : "") << "\"" << attr("title", s.label)
        << attr("data-color", hex_color(s.color)) << attr("style", "background:" + hex_color(s.color)) << "></span>";
  }
  if (layer == Layer::error) {
    out << " grey: exact; blues: within the bound (1e-6 to 1); yellow to red: over it (1 to 1e6); black: NaN or Inf "
           "where the reference differs";
  }
  out << "</div>\n";
}

void write_image(std::ostream& out, const HtmlCase& c, const HtmlImage& image) {
  const PoolGeometry& g = image.geometry;
  const std::int64_t side = std::max(g.grid_rows(), g.grid_cols());
  const std::int64_t scale = std::max<std::int64_t>(1, kDisplaySide / side);
  const std::int64_t width = g.grid_cols() * scale, height = g.grid_rows() * scale;
  const std::string where = image.b >= 0 ? "b=" + std::to_string(image.b) + " h=" + std::to_string(image.h) : "all heads";
  out << "<figure class=\"heatmap\"" << attr("data-layer", layer_name(image.layer)) << ">";
  out << "<div class=\"frame\"" << attr("style", "width:" + std::to_string(width) + "px;height:" + std::to_string(height) + "px")
      << "><img" << attr("src", data_uri("image/png", image.png)) << attr("width", width) << attr("height", height)
      << attr("alt", std::string(layer_name(image.layer)) + " " + where) << attr("data-layer", layer_name(image.layer))
      << attr("data-b", image.b) << attr("data-h", image.h) << attr("data-heads", image.heads)
      << attr("data-x-axis", image.x_axis) << attr("data-x-offset", image.x_offset) << attr("data-rows", g.rows)
      << attr("data-cols", g.cols) << attr("data-pool-rows", g.pool_rows) << attr("data-pool-cols", g.pool_cols) << ">";
  if (image.marker) {
    const HtmlMarker& m = *image.marker;
    const double left = (static_cast<double>(m.x / g.pool_cols) + 0.5) * scale;
    const double top = (static_cast<double>(m.y / g.pool_rows) + 0.5) * scale;
    char pos[64];
    std::snprintf(pos, sizeof pos, "left:%.1fpx;top:%.1fpx", left, top);
    out << "<div class=\"marker" << (m.first_divergence ? " first\"" + attr("id", marker_id(c)) : "\"") << attr("style", pos)
        << index_attrs(m.index) << attr("data-x", m.x) << attr("data-y", m.y)
        << attr("title", (m.first_divergence ? "first divergence " : "first bad element ") + index_string(m.index))
        << "></div>";
  }
  out << "</div><figcaption>" << where << ": ";
  if (image.layer == Layer::error) {
    out << image.count << " over bound";
  } else {
    out << image.count << " " << layer_name(image.layer);
  }
  if (image.marker) out << ", marked " << index_string(image.marker->index);
  if (g.pool_rows > 1 || g.pool_cols > 1) out << "; max over " << g.pool_rows << "x" << g.pool_cols << " elements a pixel";
  out << "</figcaption></figure>\n";
}

void write_heatmaps(std::ostream& out, const HtmlCase& c, const HtmlHeatmaps& h) {
  out << "<div class=\"heatmaps\"" << attr("data-output", h.output) << "><h4>" << html_escape(h.output) << " ("
      << html_escape(h.why);
  if (!h.comparison.empty()) out << "; err/bound of the " << html_escape(h.comparison) << " comparison";
  out << ")</h4>\n";
  if (!h.note.empty()) out << "<p>" << html_escape(h.note) << "</p>\n";
  bool shown[4] = {false, false, false, false};
  for (const HtmlImage& image : h.images) shown[static_cast<int>(image.layer)] = true;
  for (Layer layer : {Layer::error, Layer::nan, Layer::inf, Layer::unwritten}) {
    if (!shown[static_cast<int>(layer)]) continue;
    write_legend(out, layer);
    out << "<div class=\"heatgrid\">\n";
    for (const HtmlImage& image : h.images) {
      if (image.layer == layer) write_image(out, c, image);
    }
    out << "</div>\n";
  }
  out << "</div>\n";
}

void write_rows(std::ostream& out, const HtmlCase& c) {
  out << "<h3>Per row: reference against kernel</h3>\n<p><span class=\"key-ref\">reference</span> (FP64, whole row) "
         "against <span class=\"key-kernel\">kernel</span>: " << html_escape(c.row_source) << "</p>\n";
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    if (i == kOpenRowPlots) out << "<details><summary>" << c.rows.size() - kOpenRowPlots << " more heads</summary>\n";
    const HtmlRowPlots& p = c.rows[i];
    out << "<h4>b=" << p.b << " h=" << p.h << "</h4><div class=\"rowplots\">";
    for (const std::string& svg : p.svgs) out << svg;
    out << "</div>\n";
  }
  if (c.rows.size() > kOpenRowPlots) out << "</details>\n";
}

void write_descriptor_text(std::ostream& out, const std::string& text) {
  out << "<h3>cuBLASLt descriptors and lint</h3>\n<pre>";
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const bool lint = line.find("LINT ") != std::string::npos;
    out << (lint ? "<span class=\"lint\">" : "") << html_escape(line) << (lint ? "</span>" : "") << "\n";
  }
  out << "</pre>\n";
}

void write_case(std::ostream& out, const HtmlCase& c) {
  const CaseResult& r = c.result;
  out << "<section class=\"case\"" << attr("id", c.id) << attr("data-impl", r.impl)
      << attr("data-verdict", verdict_name(r.verdict)) << ">\n";
  out << "<h2><span class=\"verdict " << verdict_name(r.verdict) << "\">" << verdict_name(r.verdict) << "</span> "
      << html_escape(r.impl) << ": " << html_escape(r.description.label) << "</h2>\n";
  if (!c.context.empty()) out << "<p>" << html_escape(c.context) << "</p>\n";
  out << "<p class=\"meta\">" << html_escape(r.algorithm);
  if (!r.description.source.empty()) out << "; inputs: " << html_escape(r.description.source);
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f", r.seconds);
  out << "; " << seconds << " s</p>\n";
  if (!r.reason.empty()) out << "<p>" << verdict_name(r.verdict) << ": " << html_escape(r.reason) << "</p>\n";
  if (!r.outputs.empty()) write_stage_table(out, c);
  if (r.divergence) write_pinpoint_html(out, *r.divergence);
  if (!c.heatmaps.empty()) {
    out << "<h3>Heatmaps</h3>\n";
    for (const HtmlHeatmaps& h : c.heatmaps) write_heatmaps(out, c, h);
  }
  if (!c.rows.empty()) write_rows(out, c);
  if (!c.descriptors.empty()) write_descriptor_text(out, c.descriptors);
  out << "</section>\n";
}

}  // namespace

std::string marker_id(const HtmlCase& c) { return c.id + "-marker"; }

void write_html_report(std::ostream& out, const HtmlReport& report) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">"
      << "<title>" << html_escape(report.title) << "</title>\n<style>" << kStyle << "</style></head>\n<body>\n";
  out << "<header><h1>" << html_escape(report.title) << "</h1><p class=\"meta\">command <code>"
      << html_escape(report.command) << "</code>; version " << html_escape(report.version) << "; device "
      << html_escape(report.device) << "</p></header>\n";
  for (const HtmlSummary& s : report.summary) {
    if (const HtmlTable* t = std::get_if<HtmlTable>(&s)) write_table(out, *t);
    if (const HtmlChart* c = std::get_if<HtmlChart>(&s)) write_chart(out, *c);
  }
  if (!report.cases.empty()) write_index(out, report.cases);
  for (const HtmlCase& c : report.cases) write_case(out, c);
  out << "</body></html>\n";
}

}  // namespace fc

#include "reports/row_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "reports/html_text.h"

namespace fc {
namespace {

constexpr int kLeft = 58, kRight = 8, kTop = 18, kBottom = 18;

struct Band {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  bool empty() const { return lo > hi; }
};

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string coord(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

// Finite values of each bin of rows.
std::vector<Band> bands(const std::vector<double>& values, std::size_t bins) {
  std::vector<Band> out(bins);
  const std::size_t n = values.size();
  for (std::size_t row = 0; row < n; ++row) {
    if (!std::isfinite(values[row])) continue;
    Band& b = out[row * bins / n];
    b.lo = std::min(b.lo, values[row]);
    b.hi = std::max(b.hi, values[row]);
  }
  return out;
}

// One closed outline per run of bins with values: along the maxima, back along the minima.
std::string band_path(const std::vector<Band>& b, double x0, double bin_width, double y0, double y_scale, double y_min) {
  std::ostringstream d;
  auto y = [&](double v) { return coord(y0 - (v - y_min) * y_scale); };
  std::size_t i = 0;
  while (i < b.size()) {
    if (b[i].empty()) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < b.size() && !b[end].empty()) ++end;
    for (std::size_t j = i; j < end; ++j) {
      d << (j == i ? "M" : "L") << coord(x0 + (j + 0.5) * bin_width) << "," << y(b[j].hi);
    }
    for (std::size_t j = end; j-- > i;) d << "L" << coord(x0 + (j + 0.5) * bin_width) << "," << y(b[j].lo);
    d << "Z";
    i = end;
  }
  return d.str();
}

}  // namespace

std::string row_plot_svg(const std::string& title, const RowSeries& series, int width, int height) {
  const std::size_t rows = series.reference.size();
  if (rows == 0) throw Error("row plot: no rows");
  if (!series.kernel.empty() && series.kernel.size() != rows) throw Error("row plot: kernel and reference rows differ");
  const int plot_width = width - kLeft - kRight, plot_height = height - kTop - kBottom;
  const std::size_t bins = std::min<std::size_t>(rows, static_cast<std::size_t>(plot_width));
  const std::vector<Band> reference = bands(series.reference, bins);
  const std::vector<Band> kernel = series.kernel.empty() ? std::vector<Band>{} : bands(series.kernel, bins);

  Band range;
  for (const std::vector<Band>* s : {&reference, &kernel}) {
    for (const Band& b : *s) {
      if (b.empty()) continue;
      range.lo = std::min(range.lo, b.lo);
      range.hi = std::max(range.hi, b.hi);
    }
  }
  if (range.empty()) range = {0, 1};
  if (range.hi - range.lo < 1e-300 + 1e-12 * std::fabs(range.hi)) {
    const double pad = range.hi == 0 ? 1 : 0.05 * std::fabs(range.hi);
    range = {range.lo - pad, range.hi + pad};
  }
  const double bin_width = static_cast<double>(plot_width) / bins;
  const double y_scale = plot_height / (range.hi - range.lo);
  const double y0 = kTop + plot_height;

  std::ostringstream svg;
  svg << "<svg class=\"rowplot\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" role=\"img\" aria-label=\"" << html_escape(title) << "\">";
  svg << "<text class=\"title\" x=\"" << kLeft << "\" y=\"12\">" << html_escape(title) << "</text>";
  svg << "<rect class=\"axis\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_width << "\" height=\""
      << plot_height << "\"/>";
  svg << "<text class=\"tick\" x=\"" << kLeft - 4 << "\" y=\"" << kTop + 8 << "\" text-anchor=\"end\">" << number(range.hi)
      << "</text>";
  svg << "<text class=\"tick\" x=\"" << kLeft - 4 << "\" y=\"" << y0 << "\" text-anchor=\"end\">" << number(range.lo)
      << "</text>";
  svg << "<text class=\"tick\" x=\"" << kLeft << "\" y=\"" << height - 4 << "\">row 0</text>";
  svg << "<text class=\"tick\" x=\"" << width - kRight << "\" y=\"" << height - 4 << "\" text-anchor=\"end\">row "
      << rows - 1 << "</text>";
  svg << "<path class=\"ref\" d=\"" << band_path(reference, kLeft, bin_width, y0, y_scale, range.lo) << "\"/>";
  if (!kernel.empty()) {
    svg << "<path class=\"kernel\" d=\"" << band_path(kernel, kLeft, bin_width, y0, y_scale, range.lo) << "\"/>";
    std::vector<bool> ticked(bins, false);
    for (std::size_t row = 0; row < rows; ++row) {
      const double k = series.kernel[row], x = series.reference[row];
      if (std::isfinite(k) || (!std::isnan(k) && k == x)) continue;
      const std::size_t bin = row * bins / rows;
      if (ticked[bin]) continue;
      ticked[bin] = true;
      svg << "<line class=\"bad\" x1=\"" << coord(kLeft + (bin + 0.5) * bin_width) << "\" x2=\""
          << coord(kLeft + (bin + 0.5) * bin_width) << "\" y1=\"" << kTop << "\" y2=\"" << kTop + 6
          << "\"><title>row " << row << ": kernel " << number(k) << ", reference " << number(x) << "</title></line>";
    }
  }
  svg << "</svg>";
  return svg.str();
}

}  // namespace fc

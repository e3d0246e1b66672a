#pragma once
// Per-row plots of one head (row max, row sum, lse): the reference against the kernel over
// the query rows, as inline SVG. Where there are more rows than horizontal bins, each bin
// is drawn as the min..max band of its rows, so one outlying row still shows; rows where
// the kernel holds NaN or Inf and the reference does not hold the same get a red tick.
#include <string>
#include <vector>

namespace fc {

struct RowSeries {
  std::vector<double> reference;
  std::vector<double> kernel;  // empty: the kernel did not capture this quantity
};

// Styled by the report's CSS classes (ref, kernel, bad, axis).
std::string row_plot_svg(const std::string& title, const RowSeries& series, int width = 360, int height = 130);

}  // namespace fc

#include "reports/heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Half-decade steps of the error / bound: 12 from 1e-6 up to 1 (calm blues), 12 from 1 up
// to 1e6 (yellow to dark red). Index 0 is an exact match, 1 at most 1e-6, 26 over 1e6 and
// 27 a NaN or Inf where the reference differs.
constexpr int kStepsPerSide = 12;
constexpr int kFirstWithin = 2, kFirstOver = kFirstWithin + kStepsPerSide, kBeyond = kFirstOver + kStepsPerSide;
constexpr int kNonFinite = kBeyond + 1;

Rgb mix(Rgb a, Rgb b, double t) {
  auto channel = [t](std::uint8_t x, std::uint8_t y) { return static_cast<std::uint8_t>(std::lround(x + (y - x) * t)); };
  return {channel(a.r, b.r), channel(a.g, b.g), channel(a.b, b.b)};
}

std::string power_of_ten(double exponent) {
  char buf[16];
  const double value = std::pow(10.0, exponent);
  std::snprintf(buf, sizeof buf, "%.2g", value);
  return buf;
}

std::vector<Swatch> error_swatches() {
  std::vector<Swatch> s;
  s.push_back({{244, 244, 244}, "0", false});
  s.push_back({{232, 238, 246}, "<= 1e-06", false});
  for (int i = 1; i <= kStepsPerSide; ++i) {
    const Rgb c = mix({222, 231, 243}, {49, 96, 166}, static_cast<double>(i) / kStepsPerSide);
    s.push_back({c, "<= " + power_of_ten(-6.0 + 0.5 * i), false});
  }
  for (int i = 1; i <= kStepsPerSide; ++i) {
    const double t = static_cast<double>(i - 1) / (kStepsPerSide - 1);
    const Rgb c = t < 0.5 ? mix({254, 217, 56}, {240, 110, 30}, 2 * t) : mix({240, 110, 30}, {140, 0, 20}, 2 * t - 1);
    s.push_back({c, "<= " + power_of_ten(0.5 * i), true});
  }
  s.push_back({{90, 0, 40}, "> 1e+06", true});
  s.push_back({{0, 0, 0}, "NaN/Inf", true});
  return s;
}

std::vector<Swatch> mask_swatches(Rgb color, const std::string& what) {
  return {{{244, 244, 244}, "none", false}, {color, what, true}};
}

}  // namespace

PoolGeometry pool_geometry(std::int64_t rows, std::int64_t cols, std::int64_t max_side) {
  if (rows < 1 || cols < 1 || max_side < 1) throw Error("heatmap: empty image or grid");
  PoolGeometry g;
  g.rows = rows;
  g.cols = cols;
  g.pool_rows = (rows + max_side - 1) / max_side;
  g.pool_cols = (cols + max_side - 1) / max_side;
  return g;
}

const char* layer_name(Layer layer) {
  switch (layer) {
    case Layer::error: return "err/bound";
    case Layer::nan: return "NaN";
    case Layer::inf: return "Inf";
    case Layer::unwritten: return "unwritten";
  }
  return "?";
}

const std::vector<Swatch>& swatches(Layer layer) {
  static const std::vector<Swatch> error = error_swatches();
  static const std::vector<Swatch> nan = mask_swatches({214, 39, 40}, "NaN");
  static const std::vector<Swatch> inf = mask_swatches({255, 127, 14}, "Inf");
  static const std::vector<Swatch> unwritten = mask_swatches({128, 60, 170}, "unwritten");
  switch (layer) {
    case Layer::error: return error;
    case Layer::nan: return nan;
    case Layer::inf: return inf;
    case Layer::unwritten: return unwritten;
  }
  return error;
}

std::uint8_t error_color(double normalized) {
  if (std::isnan(normalized) || normalized == kInf) return kNonFinite;
  if (normalized <= 0) return 0;
  if (normalized <= 1e-6) return 1;
  const double steps = 2 * std::log10(normalized);  // half decades from 1
  if (normalized <= 1.0) {
    const int i = static_cast<int>(std::ceil(steps + 2 * 6));  // 1 .. 12
    return static_cast<std::uint8_t>(kFirstWithin - 1 + std::clamp(i, 1, kStepsPerSide));
  }
  if (steps > 2 * 6) return kBeyond;
  const int i = static_cast<int>(std::ceil(steps));  // 1 .. 12
  return static_cast<std::uint8_t>(kFirstOver - 1 + std::clamp(i, 1, kStepsPerSide));
}

HeatmapLayers::HeatmapLayers(std::int64_t rows, std::int64_t cols, std::int64_t max_side, bool with_error)
    : geometry_(pool_geometry(rows, cols, max_side)), with_error_(with_error) {
  const auto cells = static_cast<std::size_t>(geometry_.grid_rows() * geometry_.grid_cols());
  if (with_error_) error_.assign(cells, 0.0);
  nan_.assign(cells, 0);
  inf_.assign(cells, 0);
  unwritten_.assign(cells, 0);
}

void HeatmapLayers::add_row(std::int64_t row, const double* normalized, const ElementState* states) {
  if (row < 0 || row >= geometry_.rows) throw Error("heatmap: row " + std::to_string(row) + " outside the image");
  const std::int64_t base = (row / geometry_.pool_rows) * geometry_.grid_cols();
  for (std::int64_t col = 0; col < geometry_.cols; ++col) {
    const auto cell = static_cast<std::size_t>(base + col / geometry_.pool_cols);
    bool bad = false;
    if (with_error_) {
      const double e = std::isnan(normalized[col]) ? kInf : normalized[col];
      if (e > error_[cell]) error_[cell] = e;
      if (e > 1.0) {
        note(Layer::error, row, col);
        bad = true;
      }
    }
    switch (states[col]) {
      case ElementState::finite: break;
      case ElementState::nan:
        nan_[cell] = 1;
        note(Layer::nan, row, col);
        bad = bad || !with_error_;
        break;
      case ElementState::inf:
        inf_[cell] = 1;
        note(Layer::inf, row, col);
        break;
      case ElementState::unwritten:
        unwritten_[cell] = 1;
        note(Layer::unwritten, row, col);
        bad = bad || !with_error_;
        break;
    }
    if (bad && !first_bad_) first_bad_ = std::make_pair(row, col);
  }
}

void HeatmapLayers::note(Layer layer, std::int64_t row, std::int64_t col) {
  const int i = static_cast<int>(layer);
  if (counts_[i]++ == 0) first_[i] = std::make_pair(row, col);
}

std::int64_t HeatmapLayers::count(Layer layer) const { return counts_[static_cast<int>(layer)]; }

std::string HeatmapLayers::png(Layer layer) const {
  std::vector<Rgb> palette;
  for (const Swatch& s : swatches(layer)) palette.push_back(s.color);
  std::vector<std::uint8_t> pixels;
  switch (layer) {
    case Layer::error:
      if (!with_error_) throw Error("heatmap: no error layer without a reference");
      pixels.resize(error_.size());
      std::transform(error_.begin(), error_.end(), pixels.begin(), error_color);
      break;
    case Layer::nan: pixels = nan_; break;
    case Layer::inf: pixels = inf_; break;
    case Layer::unwritten: pixels = unwritten_; break;
  }
  return encode_indexed_png(geometry_.grid_cols(), geometry_.grid_rows(), pixels, palette);
}

}  // namespace fc

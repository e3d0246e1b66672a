#pragma once
// Heatmaps of one stage output over one head's rows x columns (keys or head dims), or over
// rows x heads for a per-row quantity: the error / bound of every element, and masks of its
// NaN, Inf and unwritten elements. A large tensor is max-pooled onto a grid of at most
// `max_side` cells a side, so a single bad element keeps its whole cell bad.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/png.h"

namespace fc {

struct PoolGeometry {
  std::int64_t rows = 0, cols = 0;            // source elements
  std::int64_t pool_rows = 1, pool_cols = 1;  // source elements per grid cell, each way
  std::int64_t grid_rows() const { return (rows + pool_rows - 1) / pool_rows; }
  std::int64_t grid_cols() const { return (cols + pool_cols - 1) / pool_cols; }
};
// The smallest whole pooling factors that fit rows x cols into max_side x max_side cells.
PoolGeometry pool_geometry(std::int64_t rows, std::int64_t cols, std::int64_t max_side);

// What one element of a kernel's tensor holds (stages/flags.h tells its poison apart).
enum class ElementState : std::uint8_t { finite, nan, inf, unwritten };

enum class Layer : std::uint8_t { error, nan, inf, unwritten };
const char* layer_name(Layer layer);  // "err/bound", "NaN", "Inf", "unwritten"

// One entry of a layer's palette as its legend shows it. `alarm`: the colour means over
// the bound (error layer) or present (masks).
struct Swatch {
  Rgb color;
  std::string label;
  bool alarm = false;
};
const std::vector<Swatch>& swatches(Layer layer);
// Palette index of a normalized error |kernel - reference| / bound (+inf: a NaN or Inf
// where the reference differs): 0 exact, then half-decade steps up to and past 1.
std::uint8_t error_color(double normalized);

// The layers of one image, filled row by row, each cell holding the max of its elements.
class HeatmapLayers {
 public:
  HeatmapLayers(std::int64_t rows, std::int64_t cols, std::int64_t max_side, bool with_error);

  // One source row: `normalized` (cols values, NaN counted as +inf; ignored without the
  // error layer) and the state of each element.
  void add_row(std::int64_t row, const double* normalized, const ElementState* states);

  const PoolGeometry& geometry() const { return geometry_; }
  bool with_error() const { return with_error_; }
  std::int64_t count(Layer layer) const;  // elements over bound (error) or in the mask
  // The first bad element in row-major order, as (row, col): over the bound with the error
  // layer, else NaN or unwritten.
  std::optional<std::pair<std::int64_t, std::int64_t>> first_bad() const { return first_bad_; }
  // The first element of a layer (over the bound, or in the mask), as (row, col).
  std::optional<std::pair<std::int64_t, std::int64_t>> first(Layer layer) const { return first_[static_cast<int>(layer)]; }
  std::string png(Layer layer) const;

 private:
  PoolGeometry geometry_;
  bool with_error_;
  std::vector<double> error_;                       // max normalized error per cell
  std::vector<std::uint8_t> nan_, inf_, unwritten_;  // any per cell
  std::int64_t counts_[4] = {0, 0, 0, 0};
  std::optional<std::pair<std::int64_t, std::int64_t>> first_bad_;
  std::optional<std::pair<std::int64_t, std::int64_t>> first_[4];

  void note(Layer layer, std::int64_t row, std::int64_t col);
};

}  // namespace fc

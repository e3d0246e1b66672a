// index-overflow: a row offset computed in 16 or 32 bits, in elements or in bytes, wraps
// where it reaches 2^16, 2^31 or 2^32. From the first row whose offset reaches it, rows are not
// where they belong: with an unsigned index they land 2^16 or 2^32 (in the index's unit)
// earlier, over the rows there, and are missing from their own place (a signed one goes
// negative and writes outside). So an element is explained when it lies at or past the first
// wrapped row and its place still holds the buffer's poison (NaN), or when it holds the
// reference of the element one wrap later. The first wrapped row itself must be wrong (when it
// is in the diagnosed head).
#include <cmath>
#include <optional>
#include <string>

#include "harness/trace/hypotheses/diagnosis.h"
#include "reference/compare.h"

namespace fc {
namespace {

// Each wrap (unit 1: elements, else bytes) with the first global row past it.
template <class F>
void for_each_wrap(std::int64_t cols, std::int64_t elem, std::int64_t total_rows, F&& f) {
  for (const std::int64_t unit : {std::int64_t{1}, elem}) {
    for (const int bits : {16, 31, 32}) {
      const std::int64_t wrap = std::int64_t{1} << bits, row_units = cols * unit;
      const std::int64_t first_wrapped = (wrap + row_units - 1) / row_units;
      // At least two rows below the wrap: otherwise no row but the first is addressable at all.
      if (first_wrapped >= 2 && first_wrapped < total_rows) f(unit, bits, first_wrapped);
    }
  }
}

std::string wrap_text(const Dims& dims, std::int64_t cols, std::int64_t unit, int bits, std::int64_t first_wrapped) {
  const Index4 at = index_in(dims, first_wrapped * cols);
  return "from b=" + std::to_string(at.b) + " h=" + std::to_string(at.h) + " row " + std::to_string(at.row) +
         " on, rows are not where they belong; that row's offset, " + std::to_string(first_wrapped * cols * unit) +
         (unit == 1 ? " elements" : " bytes") + ", is the first past 2^" + std::to_string(bits) +
         ": a row offset computed in " + (bits == 16 ? "16" : "32") + " bits wraps there";
}

std::int64_t cols_of(const Dims& dims) { return dims.size() == 4 ? dims[3] : 1; }

}  // namespace

std::optional<std::string> index_wrap_at(const Dims& dims, DType dtype, std::int64_t flat) {
  if (dims.size() < 3) return std::nullopt;
  const std::int64_t cols = cols_of(dims);
  if (flat % cols != 0) return std::nullopt;
  std::optional<std::string> text;
  for_each_wrap(cols, static_cast<std::int64_t>(dtype_size(dtype)), numel_of(dims) / cols,
                [&](std::int64_t unit, int bits, std::int64_t first_wrapped) {
                  if (!text && first_wrapped == flat / cols) text = wrap_text(dims, cols, unit, bits, first_wrapped);
                });
  return text;
}

Explanation test_index_overflow(const Diagnosis& d) {
  const Dims& dims = d.result.dims;
  if (dims.size() < 3 || d.kernel.size() == 0) return {};
  const std::int64_t cols = cols_of(dims);
  const std::int64_t head_row0 = (d.b * dims[1] + d.h) * dims[2];  // global row of the head's row 0
  const HostTensor* ref = d.reference_tensor;
  Explanation best;
  for_each_wrap(cols, static_cast<std::int64_t>(dtype_size(d.result.dtype)), numel_of(dims) / cols,
                [&](std::int64_t unit, int bits, std::int64_t first_wrapped) {
    const std::int64_t local = first_wrapped - head_row0;
    if (local >= 0 && local < d.kernel.rows()) {
      bool wrong = false;
      for (Eigen::Index c = 0; c < d.kernel.cols() && !wrong; ++c) {
        wrong = !(std::fabs(d.kernel(local, c) - d.reference(local, c)) <= d.bound(local, c));
      }
      if (!wrong) return;
    }
    const std::int64_t modulus = (std::int64_t{1} << (bits == 16 ? 16 : 32)) / unit;
    std::size_t n = 0;
    for (const BadElement& e : d.bad) {
      const std::int64_t global_row = head_row0 + e.r, flat = global_row * cols + e.c;
      bool explained = global_row >= first_wrapped && std::isnan(e.kernel);  // its place still poisoned
      if (!explained && ref && bits != 31 && flat + modulus < ref->numel()) {
        explained = d.explains(e, ref->get(flat + modulus));
      }
      n += explained;
    }
    const double fraction = static_cast<double>(n) / static_cast<double>(d.bad.size());
    if (n == 0 || fraction <= best.explained) return;
    best = {"index-overflow", fraction,
            d.result.name + ": " + wrap_text(dims, cols, unit, bits, first_wrapped) + " (" + explained_text(d, n) + ")"};
  });
  return best;
}

}  // namespace fc

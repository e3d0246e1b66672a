// index-overflow: a row offset computed in 16 or 32 bits, in elements or in bytes, wraps
// where it reaches 2^16, 2^31 or 2^32. From the first row whose offset reaches it, rows are not
// where they belong: with an unsigned index they land 2^16 or 2^32 (in the index's unit)
// earlier, over the rows there, and are missing from their own place (a signed one goes
// negative and writes outside). So an element is explained when the output's never-written
// elements start exactly at the first wrapped row and it lies there or past it, or when it
// holds the reference of the element one wrap later (a row the sample judged).
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
    // Missing from their place: the output's never-written elements start exactly there.
    const bool missing = d.result.flags.unwritten > 0 &&
                         static_cast<std::int64_t>(d.result.flags.first_unwritten) == first_wrapped * cols;
    const std::int64_t modulus = (std::int64_t{1} << (bits == 16 ? 16 : 32)) / unit;
    std::size_t n = 0;
    for (const BadElement& e : d.bad) {
      const std::int64_t global_row = head_row0 + e.r, flat = global_row * cols + e.c;
      bool explained = missing && global_row >= first_wrapped && std::isnan(e.kernel);  // its place still poisoned
      if (!explained && ref && bits != 31 && flat + modulus < ref->numel()) {
        const Index4 from = index_in(dims, flat + modulus);
        explained = d.judged(from.b, from.h, from.row) && d.explains(e, ref->get(flat + modulus));
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

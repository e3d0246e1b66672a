// mask-mismatch: the kernel's masked pattern differs from the mask's. For key-indexed
// outputs a masked element is a -inf score or a zero probability; an element is explained
// when the kernel masks it and the reference does not, or the other way round. For output
// rows with no key to attend to (the reference's convention is 0), the kernel is tested for
// the uniform average of V: every key weighted equally, a finite masking bias.
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool kernel_masked(const Diagnosis& d, double k) {
  return d.result.quantity == Quantity::scores ? k == -kInf : k == 0.0;
}

bool mask_allows(const Diagnosis& d, const BadElement& e) { return d.head.bias(e.row, e.col) != -kInf; }

// Where the elements lie: one diagonal (key - row - diagonal constant), a block, or spread.
std::string pattern_of(const Diagnosis& d, const std::vector<const BadElement*>& elements) {
  if (elements.empty()) return "";
  const std::int64_t diagonal = d.inputs.problem.diagonal_of(d.b);
  std::set<std::int64_t> offsets;
  std::int64_t r0 = elements.front()->row, r1 = r0, j0 = elements.front()->col, j1 = j0;
  for (const BadElement* e : elements) {
    offsets.insert(e->col - e->row - diagonal);
    r0 = std::min(r0, e->row);
    r1 = std::max(r1, e->row);
    j0 = std::min(j0, e->col);
    j1 = std::max(j1, e->col);
  }
  if (offsets.size() == 1) {
    const std::int64_t off = *offsets.begin();
    return "all on one diagonal, key = row + " + std::to_string(diagonal + off) + " (" +
           (off == 0 ? std::string("the causal diagonal itself")
                     : std::to_string(std::llabs(off)) + (off < 0 ? " left of" : " right of") + " the causal diagonal") +
           ")";
  }
  if (static_cast<std::int64_t>(elements.size()) == (r1 - r0 + 1) * (j1 - j0 + 1)) {
    return "a block: rows " + std::to_string(r0) + ".." + std::to_string(r1) + ", keys " + std::to_string(j0) + ".." +
           std::to_string(j1);
  }
  // The key columns that hold them: one column per row at a fixed distance from the row's first key?
  return "rows " + std::to_string(r0) + ".." + std::to_string(r1) + ", keys " + std::to_string(j0) + ".." +
         std::to_string(j1);
}

Explanation masked_pattern(const Diagnosis& d) {
  std::vector<const BadElement*> extra, missing;
  std::map<double, std::size_t> missing_values;  // what the kernel holds where it should mask
  for (const BadElement& e : d.bad) {
    const bool allowed = mask_allows(d, e);
    const bool masked = kernel_masked(d, e.kernel);
    if (masked && allowed) extra.push_back(&e);
    if (!masked && !allowed) {
      missing.push_back(&e);
      ++missing_values[e.kernel];
    }
  }
  const std::size_t explained = extra.size() + missing.size();
  if (explained == 0) return {};
  std::string evidence = d.result.name + " is masked where the mask attends, or attended where it masks: " +
                         explained_text(d, explained) + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h);
  if (!extra.empty()) {
    evidence += "; " + std::to_string(extra.size()) + " keys masked that the mask keeps (first row " +
                std::to_string(extra.front()->row) + " key " + std::to_string(extra.front()->col) + "), " +
                pattern_of(d, extra);
  }
  if (!missing.empty()) {
    evidence += "; " + std::to_string(missing.size()) + " masked keys attended (first row " +
                std::to_string(missing.front()->row) + " key " + std::to_string(missing.front()->col) + "), " +
                pattern_of(d, missing);
    if (missing_values.size() == 1) evidence += ", every one holding " + number_text(missing_values.begin()->first);
  }
  return {"mask-mismatch", static_cast<double>(explained) / static_cast<double>(d.bad.size()), evidence};
}

Explanation uniform_average(const Diagnosis& d) {
  if (d.result.quantity != Quantity::output || d.result.dims.size() != 4) return {};
  const std::int64_t keys = d.inputs.problem.kv_len_of(d.b);
  if (keys == 0) return {};
  const MatrixR mean = d.head.v.topRows(keys).colwise().mean();
  std::size_t explained = 0;
  std::set<std::int64_t> rows;
  for (const BadElement& e : d.bad) {
    bool masked_row = true;
    for (std::int64_t j = 0; j < keys && masked_row; ++j) masked_row = d.head.bias(e.row, j) == -kInf;
    if (!masked_row || e.reference != 0.0) continue;
    // The average of up to Sk values each rounded to the input format: its own rounding.
    const double predicted = mean(0, e.col);
    const double tolerance = 4 * unit_roundoff(d.inputs.problem.dtype) * d.head.v.col(e.col).cwiseAbs().mean();
    if (std::fabs(e.kernel - predicted) <= tolerance + 2 * e.bound) {
      ++explained;
      rows.insert(e.row);
    }
  }
  if (explained == 0) return {};
  return {"mask-mismatch", static_cast<double>(explained) / static_cast<double>(d.bad.size()),
          std::to_string(rows.size()) + " rows of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) +
              " have no key to attend to, and the kernel wrote the uniform average of V over their " +
              std::to_string(keys) + " keys (every masked key weighted alike: a finite masking bias), where " +
              "attention over no key is 0 (first row " + std::to_string(*rows.begin()) + "; " +
              explained_text(d, explained) + ")"};
}

}  // namespace

Explanation test_mask_mismatch(const Diagnosis& d) {
  if (d.key_indexed()) return masked_pattern(d);
  return uniform_average(d);
}

}  // namespace fc

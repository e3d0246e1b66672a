#pragma once
// Comparison of a kernel's stage output with its reference under the per-element bounds.
// An element passes when both are finite and |kernel - reference| <= bound, or when the
// reference is infinite (a masked score) and the kernel holds the same infinity. NaN never
// passes: not in the kernel where the reference is finite, and not where the reference is
// NaN too (a NaN input reaching the stage is a divergence whose cause is the input).
// Every element is judged against both bounds: over the worst-case bound always fails; the
// tight bound (<= the worst-case one) decides by default (BoundChoice).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "reference/stage_eval.h"

namespace fc {

// Where an element sits: batch, head, row, key column (-1 for a per-row quantity such as
// the row max, and for an output's head-dim column the column itself).
struct Index4 {
  std::int64_t b = -1, h = -1, row = -1, col = -1;
  bool operator==(const Index4& o) const { return b == o.b && h == o.h && row == o.row && col == o.col; }
};

// Element `flat` of a row-major [B,H,S,C] tensor, or of a [B,H,S] one (col -1).
Index4 index_in(const Dims& dims, std::int64_t flat);
// "b=1 h=0 row 200 col 3", without the column for a row quantity.
std::string at_text(const Index4& i);

struct ElementReport {
  Index4 index;
  double kernel = 0, reference = 0, bound = 0, tight = 0;
};

// Which bound decides the verdict: the tight one (default) or only the worst-case one.
enum class BoundChoice : std::uint8_t { tight, worst };

struct Metrics {
  std::int64_t elements = 0;
  std::int64_t nan_kernel = 0, posinf_kernel = 0, neginf_kernel = 0;
  std::int64_t nan_reference = 0, inf_reference = 0;
  std::int64_t masked_neg_inf = 0;  // kernel -inf where the reference is -inf: masked scores, a masked row's max
  // Over finite pairs; the normalized errors include non-finite ones (inf).
  double max_abs_error = 0, max_rel_error = 0;
  double max_normalized_error = 0;  // error / worst-case bound
  double max_tight_error = 0;       // error / tight bound
  std::int64_t over_bound = 0;      // elements over the worst-case bound
  std::int64_t over_tight = 0;      // elements over the tight bound (a superset)
  std::int64_t max_ulp = 0;  // in the kernel's stored format, finite pairs
  // First in (b, h, row, col) order over each bound, and the largest error / tight bound.
  std::optional<ElementReport> first_failure, first_worst_case_failure;
  std::optional<ElementReport> worst;

  BoundChoice judged_by = BoundChoice::tight;
  bool passed() const { return failures() == 0; }
  std::int64_t failures() const { return judged_by == BoundChoice::tight ? over_tight : over_bound; }
  // The first element over the deciding bound.
  const std::optional<ElementReport>& first_over() const {
    return judged_by == BoundChoice::tight ? first_failure : first_worst_case_failure;
  }
};

// |kernel - reference| / bound for finite pairs (0 when equal, +inf when the bound is 0 and
// they differ); 0 where both hold the same infinity; +inf for any other non-finite pair (a
// NaN on either side never passes). Over 1 fails.
double normalized_error(double kernel, double reference, double bound);

struct HeadSpot {
  std::int64_t b = 0, h = 0;
  std::int64_t col_offset = 0;  // global index of the matrix's column 0 (a tile's first key)
  bool per_row = false;         // the matrix is a row quantity: report col -1
  // The query rows the matrix's rows are (a row sample), or null: row r is row r.
  const std::vector<std::int64_t>* rows = nullptr;
  std::int64_t row_of(std::int64_t r) const { return rows ? (*rows)[static_cast<std::size_t>(r)] : r; }
};

// Compares one head's kernel values (as stored in `kernel_format`, converted to double).
Metrics compare_head(const HeadSpot& spot, const MatrixR& kernel, const Bounded& reference, DType kernel_format,
                     BoundChoice judged_by = BoundChoice::tight);

// Folds the metrics of other elements into `into`, in any order (heads, blocks of rows, windows
// of rows over every head): the first failure is the one first in (b, h, row, col) order, and
// of equally bad elements the worst is the first too.
void merge_metrics(Metrics& into, const Metrics& other);
bool comes_before(const Index4& a, const Index4& b);

}  // namespace fc

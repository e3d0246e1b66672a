#pragma once
// Comparison of a kernel's stage output with its reference under the per-element bound.
// An element passes when both are finite and |kernel - reference| <= bound, or when the
// reference is infinite (a masked score) and the kernel holds the same infinity. NaN never
// passes: not in the kernel where the reference is finite, and not where the reference is
// NaN too (a NaN input reaching the stage is a divergence whose cause is the input).
#include <cstdint>
#include <optional>
#include <string>

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
  double kernel = 0, reference = 0, bound = 0;
};

struct Metrics {
  std::int64_t elements = 0;
  std::int64_t nan_kernel = 0, posinf_kernel = 0, neginf_kernel = 0;
  std::int64_t nan_reference = 0, inf_reference = 0;
  std::int64_t masked_neg_inf = 0;  // kernel -inf where the reference is -inf: masked scores, a masked row's max
  double max_abs_error = 0, max_rel_error = 0, max_normalized_error = 0;  // over finite pairs; normalized includes non-finite (inf)
  std::int64_t over_bound = 0;
  std::int64_t max_ulp = 0;  // in the kernel's stored format, finite pairs
  std::optional<ElementReport> first_failure;  // first in (b, h, row, col) order
  std::optional<ElementReport> worst;          // largest error / bound

  bool passed() const { return over_bound == 0; }
};

struct HeadSpot {
  std::int64_t b = 0, h = 0;
  std::int64_t col_offset = 0;  // global index of the matrix's column 0 (a tile's first key)
  bool per_row = false;         // the matrix is a row quantity: report col -1
};

// Compares one head's kernel values (as stored in `kernel_format`, converted to double).
Metrics compare_head(const HeadSpot& spot, const MatrixR& kernel, const Bounded& reference, DType kernel_format);

// Folds `next`, which comes after `into` in (b, h, row, col) order, into `into`.
void merge_after(Metrics& into, const Metrics& next);

}  // namespace fc

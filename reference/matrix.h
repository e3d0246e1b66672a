#pragma once
// Eigen types of the reference and the bridge between [B,H,R,C] host tensors and one
// head's R x C matrix. Row quantities (row max, row sum, lse) are R x 1 matrices.
#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace fc {

using MatrixR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Where head (b, h) of a rank-4 [B,H,R,C] (or rank-3 [B,H,R], one column) tensor lies: its
// rows, columns and the flat index of its first element.
struct HeadLayout {
  std::int64_t rows, cols, offset;
};
HeadLayout head_layout(const Dims& dims, std::int64_t b, std::int64_t h);
HeadLayout head_layout(const HostTensor& t, std::int64_t b, std::int64_t h);

// Head (b, h) of a rank-4 [B,H,R,C] tensor, or of a rank-3 [B,H,R] tensor as an R x 1
// matrix, converted to double. Optionally only columns [col_begin, col_end).
MatrixR head_matrix(const HostTensor& t, std::int64_t b, std::int64_t h);
MatrixR head_matrix(const HostTensor& t, std::int64_t b, std::int64_t h, std::int64_t col_begin,
                    std::int64_t col_end);

// Only rows `rows` (ascending or not) of head (b, h), in that order: what a row block or a
// row sample reads without converting the whole head.
MatrixR head_rows(const HostTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows);

// Writes m into head (b, h) of t (rounding to t's dtype).
void set_head(HostTensor& t, std::int64_t b, std::int64_t h, const MatrixR& m);
// Writes row i of m into row rows[i] of head (b, h), touching nothing else (blocks of one head
// are written by different threads).
void set_head_rows(HostTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows, const MatrixR& m);

}  // namespace fc

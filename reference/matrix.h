#pragma once
// Eigen types of the reference and the bridge between [B,H,R,C] host tensors and one
// head's R x C matrix. Row quantities (row max, row sum, lse) are R x 1 matrices.
#include <Eigen/Core>
#include <cstdint>

#include "core/tensor.h"

namespace fc {

using MatrixR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Head (b, h) of a rank-4 [B,H,R,C] tensor, or of a rank-3 [B,H,R] tensor as an R x 1
// matrix, converted to double. Optionally only columns [col_begin, col_end).
MatrixR head_matrix(const HostTensor& t, std::int64_t b, std::int64_t h);
MatrixR head_matrix(const HostTensor& t, std::int64_t b, std::int64_t h, std::int64_t col_begin,
                    std::int64_t col_end);

// Writes m into head (b, h) of t (rounding to t's dtype).
void set_head(HostTensor& t, std::int64_t b, std::int64_t h, const MatrixR& m);

}  // namespace fc

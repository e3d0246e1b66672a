#include "reference/matrix.h"

#include "core/error.h"

namespace fc {

HeadLayout head_layout(const Dims& d, std::int64_t b, std::int64_t h) {
  if (d.size() != 3 && d.size() != 4) throw Error("expected a [B,H,R,C] or [B,H,R] tensor, got " + dims_string(d));
  const std::int64_t rows = d[2], cols = d.size() == 4 ? d[3] : 1;
  return {rows, cols, (b * d[1] + h) * rows * cols};
}

HeadLayout head_layout(const HostTensor& t, std::int64_t b, std::int64_t h) { return head_layout(t.dims(), b, h); }

namespace {
HeadLayout layout(const HostTensor& t, std::int64_t b, std::int64_t h) { return head_layout(t, b, h); }
}  // namespace

MatrixR head_matrix(const HostTensor& t, std::int64_t b, std::int64_t h) {
  HeadLayout l = layout(t, b, h);
  return head_matrix(t, b, h, 0, l.cols);
}

MatrixR head_matrix(const HostTensor& t, std::int64_t b, std::int64_t h, std::int64_t col_begin,
                    std::int64_t col_end) {
  HeadLayout l = layout(t, b, h);
  MatrixR m(l.rows, col_end - col_begin);
  if (t.dtype() == DType::f64) {
    const double* p = t.data_as<double>() + l.offset;
    for (std::int64_t r = 0; r < l.rows; ++r)
      for (std::int64_t c = col_begin; c < col_end; ++c) m(r, c - col_begin) = p[r * l.cols + c];
    return m;
  }
  for (std::int64_t r = 0; r < l.rows; ++r)
    for (std::int64_t c = col_begin; c < col_end; ++c) m(r, c - col_begin) = t.get(l.offset + r * l.cols + c);
  return m;
}

MatrixR head_rows(const HostTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows) {
  HeadLayout l = layout(t, b, h);
  MatrixR m(static_cast<Eigen::Index>(rows.size()), l.cols);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= l.rows) throw Error("row " + std::to_string(rows[i]) + " is outside " + dims_string(t.dims()));
    const std::int64_t start = l.offset + rows[i] * l.cols;
    for (std::int64_t c = 0; c < l.cols; ++c) m(static_cast<Eigen::Index>(i), c) = t.get(start + c);
  }
  return m;
}

void set_head(HostTensor& t, std::int64_t b, std::int64_t h, const MatrixR& m) {
  HeadLayout l = layout(t, b, h);
  if (m.rows() != l.rows || m.cols() != l.cols) throw Error("set_head: shape mismatch");
  for (std::int64_t r = 0; r < l.rows; ++r)
    for (std::int64_t c = 0; c < l.cols; ++c) t.set(l.offset + r * l.cols + c, m(r, c));
}

void set_head_rows(HostTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows, const MatrixR& m) {
  HeadLayout l = layout(t, b, h);
  if (m.rows() != static_cast<Eigen::Index>(rows.size()) || m.cols() != l.cols) throw Error("set_head_rows: shape mismatch");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= l.rows) throw Error("row " + std::to_string(rows[i]) + " is outside " + dims_string(t.dims()));
    const std::int64_t start = l.offset + rows[i] * l.cols;
    for (std::int64_t c = 0; c < l.cols; ++c) t.set(start + c, m(static_cast<Eigen::Index>(i), c));
  }
}

}  // namespace fc

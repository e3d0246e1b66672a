#pragma once
// Row-major FP64 matrices on the device for the GPU reference, allocated stream-ordered
// (cudaMallocAsync) so that host threads judging different heads never serialize on
// cudaFree, and row-major DGEMM through cuBLAS. No Eigen here: the kernels include this
// (transfer.h moves matrices to and from the host).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "core/dtype.h"

namespace fc::gpu {

class DeviceMatrix {
 public:
  DeviceMatrix() = default;
  DeviceMatrix(std::int64_t rows, std::int64_t cols, cudaStream_t stream);
  // rows x cols at `data` inside memory that `owner` keeps alive (a tile of a stack of tiles):
  // never freed by the view itself.
  static DeviceMatrix view(double* data, std::int64_t rows, std::int64_t cols, cudaStream_t stream,
                           std::shared_ptr<const void> owner);
  ~DeviceMatrix() { release(); }
  DeviceMatrix(DeviceMatrix&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        rows_(o.rows_),
        cols_(o.cols_),
        stream_(o.stream_),
        owner_(std::move(o.owner_)) {}
  DeviceMatrix& operator=(DeviceMatrix&& o) noexcept;
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;

  double* data() const { return data_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t size() const { return rows_ * cols_; }
  double* row(std::int64_t r) const { return data_ + r * cols_; }
  cudaStream_t stream() const { return stream_; }  // the stream it is allocated and freed on
  const std::shared_ptr<const void>& owner() const { return owner_; }  // null unless a view

 private:
  void release() noexcept;
  double* data_ = nullptr;
  std::int64_t rows_ = 0, cols_ = 0;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<const void> owner_;  // set for a view
};

// A bounded tensor on the device: value and both bounds (stage_eval.h, Bounded).
struct DeviceBounded {
  DeviceMatrix value, bound, tight;
  DType format = DType::f64;
};

DeviceBounded allocate_bounded(std::int64_t rows, std::int64_t cols, DType format, cudaStream_t stream);
DeviceMatrix zeros(std::int64_t rows, std::int64_t cols, cudaStream_t stream);
DeviceMatrix copy_of(const DeviceMatrix& m, cudaStream_t stream);

class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream);
  ~CublasHandle() {
    if (handle_) cublasDestroy(handle_);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// A row-major operand: `rows` x `cols` at `data` with row stride `ld`, transposed or not.
struct Operand {
  const double* data;
  std::int64_t rows, cols, ld;
  bool transposed = false;
  std::int64_t op_rows() const { return transposed ? cols : rows; }
  std::int64_t op_cols() const { return transposed ? rows : cols; }
};
inline Operand whole(const DeviceMatrix& m) { return {m.data(), m.rows(), m.cols(), m.cols()}; }
inline Operand rows_of(const DeviceMatrix& m, std::int64_t begin, std::int64_t count) {
  return {m.row(begin), count, m.cols(), m.cols()};
}
inline Operand cols_of(const DeviceMatrix& m, std::int64_t begin, std::int64_t count) {
  return {m.data() + begin, m.rows(), count, m.cols()};
}
inline Operand transposed(Operand o) {
  o.transposed = !o.transposed;
  return o;
}

// c = alpha op(a) op(b) + beta c, every matrix row-major (c has no gaps: ld = its cols).
void gemm(const CublasHandle& handle, double alpha, const Operand& a, const Operand& b, double beta, DeviceMatrix& c);
// For i in [0, count): c_i = alpha op(a_i) op(b_i), where a_i, b_i and c_i are a, b and c moved
// by i strides (elements); each c_i is a dense op(a) rows x op(b) cols matrix.
void gemm_batched(const CublasHandle& handle, double alpha, const Operand& a, std::int64_t stride_a, const Operand& b,
                  std::int64_t stride_b, std::int64_t count, double* c, std::int64_t stride_c);

}  // namespace fc::gpu

#include "reference/gpu/device_matrix.h"

#include "core/check.h"
#include "core/resource_usage.h"
#include "reference/gpu/thread_pool.h"

namespace fc::gpu {

DeviceMatrix::DeviceMatrix(std::int64_t rows, std::int64_t cols, cudaStream_t stream)
    : rows_(rows), cols_(cols), stream_(stream) {
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * sizeof(double);
  if (bytes == 0) return;
  data_ = static_cast<double*>(allocate_async(bytes, stream));
  count_device_allocation(static_cast<std::int64_t>(bytes));
}

DeviceMatrix DeviceMatrix::view(double* data, std::int64_t rows, std::int64_t cols, cudaStream_t stream,
                                std::shared_ptr<const void> owner) {
  DeviceMatrix m;
  m.data_ = data;
  m.rows_ = rows;
  m.cols_ = cols;
  m.stream_ = stream;
  m.owner_ = std::move(owner);
  return m;
}

DeviceMatrix& DeviceMatrix::operator=(DeviceMatrix&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    rows_ = o.rows_;
    cols_ = o.cols_;
    stream_ = o.stream_;
    owner_ = std::move(o.owner_);
  }
  return *this;
}

void DeviceMatrix::release() noexcept {
  if (owner_) {  // a view: its owner frees the memory
    owner_.reset();
    data_ = nullptr;
    return;
  }
  if (!data_) return;
  cudaFreeAsync(data_, stream_);
  count_device_allocation(-static_cast<std::int64_t>(size()) * static_cast<std::int64_t>(sizeof(double)));
  data_ = nullptr;
}

DeviceBounded allocate_bounded(std::int64_t rows, std::int64_t cols, DType format, cudaStream_t stream) {
  return {DeviceMatrix(rows, cols, stream), DeviceMatrix(rows, cols, stream), DeviceMatrix(rows, cols, stream), format};
}

DeviceMatrix zeros(std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  DeviceMatrix d(rows, cols, stream);
  if (d.size() > 0) FC_CUDA(cudaMemsetAsync(d.data(), 0, static_cast<std::size_t>(d.size()) * sizeof(double), stream));
  return d;
}

DeviceMatrix copy_of(const DeviceMatrix& m, cudaStream_t stream) {
  DeviceMatrix d(m.rows(), m.cols(), stream);
  if (d.size() > 0) {
    FC_CUDA(cudaMemcpyAsync(d.data(), m.data(), static_cast<std::size_t>(d.size()) * sizeof(double),
                            cudaMemcpyDeviceToDevice, stream));
  }
  return d;
}

CublasHandle::CublasHandle(cudaStream_t stream) {
  FC_CUBLAS(cublasCreate(&handle_));
  FC_CUBLAS(cublasSetStream(handle_, stream));
  // The reference is FP64 to the last bit cuBLAS gives: no emulation, no reduced precision.
  FC_CUBLAS(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

void gemm(const CublasHandle& handle, double alpha, const Operand& a, const Operand& b, double beta, DeviceMatrix& c) {
  const std::int64_t m = a.op_rows(), k = a.op_cols(), n = b.op_cols();
  if (b.op_rows() != k || c.rows() != m || c.cols() != n) throw Error("gpu reference: GEMM operands disagree in shape");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta C
    if (beta != 0 && beta != 1) throw Error("gpu reference: an empty GEMM with beta other than 0 or 1");
    if (beta == 0) {
      cudaStream_t stream = nullptr;
      FC_CUBLAS(cublasGetStream(handle.get(), &stream));
      FC_CUDA(cudaMemsetAsync(c.data(), 0, static_cast<std::size_t>(c.size()) * sizeof(double), stream));
    }
    return;
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T over the same memory: a
  // row-major X with row stride ld is the column-major X^T with leading dimension ld.
  const auto op = [](const Operand& o) { return o.transposed ? CUBLAS_OP_T : CUBLAS_OP_N; };
  FC_CUBLAS(cublasDgemm(handle.get(), op(b), op(a), static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                        &alpha, b.data, static_cast<int>(b.ld), a.data, static_cast<int>(a.ld), &beta, c.data(),
                        static_cast<int>(c.cols())));
}

void gemm_batched(const CublasHandle& handle, double alpha, const Operand& a, std::int64_t stride_a, const Operand& b,
                  std::int64_t stride_b, std::int64_t count, double* c, std::int64_t stride_c) {
  const std::int64_t m = a.op_rows(), k = a.op_cols(), n = b.op_cols();
  if (b.op_rows() != k) throw Error("gpu reference: batched GEMM operands disagree in shape");
  if (m == 0 || n == 0 || k == 0 || count == 0) throw Error("gpu reference: an empty batched GEMM");
  const double zero = 0;
  const auto op = [](const Operand& o) { return o.transposed ? CUBLAS_OP_T : CUBLAS_OP_N; };
  FC_CUBLAS(cublasDgemmStridedBatched(handle.get(), op(b), op(a), static_cast<int>(n), static_cast<int>(m),
                                      static_cast<int>(k), &alpha, b.data, static_cast<int>(b.ld), stride_b, a.data,
                                      static_cast<int>(a.ld), stride_a, &zero, c, static_cast<int>(n), stride_c,
                                      static_cast<int>(count)));
}

}  // namespace fc::gpu

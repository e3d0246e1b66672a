#pragma once
// The one host tensor type: a dtype, dims (row-major, last dimension contiguous) and bytes.
// fp16/bf16 elements are stored as their raw 16-bit patterns. The reference works on fp64
// tensors through Eigen maps (reference/eigen_view.h); nothing here is a matrix library.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace fc {

using Dims = std::vector<std::int64_t>;

std::int64_t numel_of(const Dims& dims);
std::string dims_string(const Dims& dims);  // "[2,4,128,64]"

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Dims dims);  // zero-filled

  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  std::int64_t dim(int i) const { return dims_.at(static_cast<std::size_t>(i)); }
  std::int64_t numel() const { return numel_of(dims_); }
  std::size_t nbytes() const { return bytes_.size(); }
  bool empty() const { return dims_.empty() && bytes_.empty(); }

  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  template <class T> T* data_as() { return reinterpret_cast<T*>(bytes_.data()); }
  template <class T> const T* data_as() const { return reinterpret_cast<const T*>(bytes_.data()); }

  // Element access through double: exact for every stored type, rounding on set.
  double get(std::int64_t flat) const;
  void set(std::int64_t flat, double value);

  // A copy converted element by element (rounding to nearest even when narrowing).
  HostTensor to(DType target) const;
  // Same bytes, new dims with the same element count.
  HostTensor reshaped(Dims dims) const;

 private:
  DType dtype_ = DType::f64;
  Dims dims_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace fc

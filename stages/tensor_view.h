#pragma once
// A stage tensor where the kernel left it: host or device memory, its format, its logical
// [B,H,R(,C)] dims and the element strides that place them (a dense permutation, so a
// column-major cuBLASLt result is described as it is, not copied into shape).
#include <cstdint>

#include "core/tensor.h"

namespace fc {

struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::f32;
  Dims dims;     // logical dims, row-major meaning
  Dims strides;  // element stride of each logical dim; empty = row-major contiguous
  bool on_device = false;
  int buffer_id = 0;  // the poison id of the buffer it lives in (0: not poisoned)

  std::int64_t numel() const { return numel_of(dims); }
  Dims effective_strides() const;
  // Logical row-major index of the element stored at `offset` elements from `data`.
  std::int64_t logical_index(std::int64_t offset) const;
};

}  // namespace fc

#pragma once
// RAII owners of cuBLASLt objects: the handle, the matmul descriptor, the matrix layout and the
// heuristic preference. The destructor destroys, moves transfer, copies are deleted. Creation is
// checked; destruction ignores its status (a destructor cannot throw).
//
// Descriptors and layouts need no GPU; the handle does (cublasLtCreate fails without a device).
#include <cublasLt.h>

#include <cstdint>
#include <utility>

#include "core/check.h"

namespace fc {
namespace detail {

template <class Object, cublasStatus_t (*Destroy)(Object)>
class LtOwner {
 public:
  LtOwner() = default;
  ~LtOwner() { reset(); }
  LtOwner(LtOwner&& o) noexcept : object_(std::exchange(o.object_, nullptr)) {}
  LtOwner& operator=(LtOwner&& o) noexcept {
    if (this != &o) {
      reset();
      object_ = std::exchange(o.object_, nullptr);
    }
    return *this;
  }
  LtOwner(const LtOwner&) = delete;
  LtOwner& operator=(const LtOwner&) = delete;

  Object get() const { return object_; }

 protected:
  Object* out() { return &object_; }  // where a Create call writes the new object

 private:
  void reset() {
    if (object_) Destroy(object_);
    object_ = nullptr;
  }
  Object object_ = nullptr;
};

}  // namespace detail

class LtHandle : public detail::LtOwner<cublasLtHandle_t, cublasLtDestroy> {
 public:
  LtHandle() { FC_CUBLAS(cublasLtCreate(out())); }
};

class LtMatmulDesc : public detail::LtOwner<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> {
 public:
  LtMatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
    FC_CUBLAS(cublasLtMatmulDescCreate(out(), compute, scale));
  }
};

// rows × cols with leading dimension ld, column-major (CUBLASLT_ORDER_COL) until an ORDER
// attribute says otherwise.
class LtMatrixLayout : public detail::LtOwner<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> {
 public:
  LtMatrixLayout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
    FC_CUBLAS(cublasLtMatrixLayoutCreate(out(), type, rows, cols, ld));
  }
};

class LtMatmulPreference
    : public detail::LtOwner<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> {
 public:
  LtMatmulPreference() { FC_CUBLAS(cublasLtMatmulPreferenceCreate(out())); }
};

}  // namespace fc

#include "core/tensor.h"

#include <cstring>

#include "core/error.h"
#include "core/numeric.h"

namespace fc {

std::int64_t numel_of(const Dims& dims) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

std::string dims_string(const Dims& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

HostTensor::HostTensor(DType dtype, Dims dims) : dtype_(dtype), dims_(std::move(dims)) {
  for (std::int64_t d : dims_) {
    if (d < 0) throw Error("negative dimension in " + dims_string(dims_));
  }
  bytes_.assign(static_cast<std::size_t>(numel_of(dims_)) * dtype_size(dtype_), 0);
}

double HostTensor::get(std::int64_t i) const {
  const std::uint8_t* p = bytes_.data();
  switch (dtype_) {
    case DType::f16: return f16_bits_to_float(reinterpret_cast<const std::uint16_t*>(p)[i]);
    case DType::bf16: return bf16_bits_to_float(reinterpret_cast<const std::uint16_t*>(p)[i]);
    case DType::f32: return reinterpret_cast<const float*>(p)[i];
    case DType::f64: return reinterpret_cast<const double*>(p)[i];
    case DType::boolean: case DType::u8: return p[i];
    case DType::u16: return reinterpret_cast<const std::uint16_t*>(p)[i];
    case DType::i32: return reinterpret_cast<const std::int32_t*>(p)[i];
    case DType::i64: return static_cast<double>(reinterpret_cast<const std::int64_t*>(p)[i]);
  }
  return 0;
}

void HostTensor::set(std::int64_t i, double v) {
  std::uint8_t* p = bytes_.data();
  switch (dtype_) {
    case DType::f16:
      reinterpret_cast<std::uint16_t*>(p)[i] = float_to_f16_bits(static_cast<float>(v));
      break;
    case DType::bf16:
      reinterpret_cast<std::uint16_t*>(p)[i] = float_to_bf16_bits(static_cast<float>(v));
      break;
    case DType::f32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f64: reinterpret_cast<double*>(p)[i] = v; break;
    case DType::boolean: p[i] = v != 0 ? 1 : 0; break;
    case DType::u8: p[i] = static_cast<std::uint8_t>(v); break;
    case DType::u16: reinterpret_cast<std::uint16_t*>(p)[i] = static_cast<std::uint16_t>(v); break;
    case DType::i32: reinterpret_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
    case DType::i64: reinterpret_cast<std::int64_t*>(p)[i] = static_cast<std::int64_t>(v); break;
  }
}

HostTensor HostTensor::to(DType target) const {
  if (target == dtype_) return *this;
  HostTensor out(target, dims_);
  const std::int64_t n = numel();
  if (target == DType::f64) {
    double* o = out.data_as<double>();
    for (std::int64_t i = 0; i < n; ++i) o[i] = get(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) out.set(i, get(i));
  }
  return out;
}

HostTensor HostTensor::reshaped(Dims dims) const {
  if (numel_of(dims) != numel()) {
    throw Error("cannot reshape " + dims_string(dims_) + " to " + dims_string(dims));
  }
  HostTensor out = *this;
  out.dims_ = std::move(dims);
  return out;
}

}  // namespace fc

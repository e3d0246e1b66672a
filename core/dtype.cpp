#include "core/dtype.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace fc {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16: case DType::bf16: case DType::u16: return 2;
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::boolean: case DType::u8: return 1;
  }
  throw Error("unknown dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::f32: return "fp32";
    case DType::f64: return "fp64";
    case DType::boolean: return "bool";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::boolean, DType::i32,
                  DType::i64, DType::u8, DType::u16}) {
    if (name == dtype_name(t)) return t;
  }
  if (name == "float16" || name == "half") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  if (name == "float32" || name == "float") return DType::f32;
  if (name == "float64" || name == "double") return DType::f64;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::f64: return std::ldexp(1.0, -53);
    default: throw Error(std::string("unit roundoff of non-float dtype ") + dtype_name(t));
  }
}

double min_normal(DType t) {
  switch (t) {
    case DType::f16: return std::ldexp(1.0, -14);
    case DType::bf16:
    case DType::f32: return std::ldexp(1.0, -126);
    case DType::f64: return std::numeric_limits<double>::min();
    default: throw Error(std::string("normal range of non-float dtype ") + dtype_name(t));
  }
}

double min_subnormal(DType t) {
  switch (t) {
    case DType::f16: return std::ldexp(1.0, -24);
    case DType::bf16: return std::ldexp(1.0, -133);
    case DType::f32: return std::ldexp(1.0, -149);
    case DType::f64: return std::numeric_limits<double>::denorm_min();
    default: throw Error(std::string("subnormal of non-float dtype ") + dtype_name(t));
  }
}

double max_finite(DType t) {
  switch (t) {
    case DType::f16: return 65504.0;
    case DType::bf16: return std::ldexp(255.0, 120);  // 0x7F7F
    case DType::f32: return std::numeric_limits<float>::max();
    case DType::f64: return std::numeric_limits<double>::max();
    default: throw Error(std::string("max of non-float dtype ") + dtype_name(t));
  }
}

}  // namespace fc

#pragma once
// Element types that cross the project: kernel inputs (fp16, bf16), accumulators and
// stage outputs (fp32), the reference (fp64), masks (bool) and padding lengths (int32).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace fc {

enum class DType : std::uint8_t { f16, bf16, f32, f64, boolean, i32, i64, u8, u16 };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);               // "fp16", "bf16", "fp32", ...
std::optional<DType> parse_dtype(const std::string& name);
bool is_floating(DType t);

// Floating-point format facts used by the error model (docs/error-model.md).
double unit_roundoff(DType t);   // u: 2^-11 fp16, 2^-8 bf16, 2^-24 fp32, 2^-53 fp64
double min_subnormal(DType t);   // smallest positive value
double min_normal(DType t);      // smallest positive normal value
double max_finite(DType t);

}  // namespace fc

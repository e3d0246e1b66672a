#include "kernels/cpu_emulated/buffer_io.h"

#include <cstring>

#include "core/error.h"
#include "core/numeric.h"

namespace fc::emu {
namespace {
double load(const Buffer& b, std::int64_t i) {
  switch (b.dtype) {
    case DType::f32: return b.as<float>()[i];
    case DType::f16: return f16_bits_to_float(b.as<std::uint16_t>()[i]);
    case DType::bf16: return bf16_bits_to_float(b.as<std::uint16_t>()[i]);
    default: throw Error("cpu implementation: unsupported buffer type " + std::string(dtype_name(b.dtype)));
  }
}
void store(Buffer& b, std::int64_t i, double x) {
  switch (b.dtype) {
    case DType::f32: b.as<float>()[i] = static_cast<float>(x); return;
    case DType::f16: b.as<std::uint16_t>()[i] = float_to_f16_bits(static_cast<float>(x)); return;
    case DType::bf16: b.as<std::uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(x)); return;
    default: throw Error("cpu implementation: unsupported buffer type " + std::string(dtype_name(b.dtype)));
  }
}
void check_range(const Buffer& b, std::int64_t end) {
  if (end > b.count) throw Error("cpu implementation: block past the end of buffer '" + b.name + "'");
}
}  // namespace

MatrixR read_block(const Buffer& buffer, std::int64_t index, std::int64_t rows, std::int64_t cols) {
  const std::int64_t base = index * rows * cols;
  check_range(buffer, base + rows * cols);
  MatrixR m(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) m(r, c) = load(buffer, base + r * cols + c);
  return m;
}

void write_block(Buffer& buffer, std::int64_t index, const MatrixR& block) {
  const std::int64_t rows = block.rows(), cols = block.cols(), base = index * rows * cols;
  check_range(buffer, base + rows * cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) store(buffer, base + r * cols + c, block(r, c));
}

}  // namespace fc::emu

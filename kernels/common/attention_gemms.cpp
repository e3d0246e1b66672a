#include "kernels/common/attention_gemms.h"

namespace fc {

GemmConfig qk_gemm(const Problem& p, std::int64_t keys, DType scores) {
  const Shape& s = p.shape;
  const std::int64_t heads = s.batch * s.kv_head_count(), rows = s.group() * s.q_len, d = s.head_dim;
  GemmConfig c;
  c.a = {p.dtype, d, keys, d, heads, s.kv_len * d};
  c.b = {p.dtype, d, rows, d, heads, rows * d};
  c.c = {scores, keys, rows, keys, heads, rows * keys};
  c.transpose_a = true;
  return c;
}

GemmConfig pv_gemm(const Problem& p, std::int64_t keys, DType out) {
  const Shape& s = p.shape;
  const std::int64_t heads = s.batch * s.kv_head_count(), rows = s.group() * s.q_len, d = s.head_dim;
  GemmConfig c;
  c.a = {p.dtype, d, keys, d, heads, s.kv_len * d};
  c.b = {p.dtype, keys, rows, keys, heads, rows * keys};
  c.c = {out, d, rows, d, heads, rows * d};
  return c;
}

std::optional<std::string> lt_unsupported(const Problem& p) {
  if (p.shape.head_dim % 8 != 0) {
    return "head dim " + std::to_string(p.shape.head_dim) + " is not a multiple of 8 (16-byte rows for cuBLASLt)";
  }
  return std::nullopt;
}

}  // namespace fc

#include "kernels/common/attention_gemms.h"

namespace fc {

GemmConfig qk_gemm(const Problem& p, std::int64_t keys, DType scores) {
  const Shape& s = p.shape;
  const std::int64_t heads = s.batch * s.heads, d = s.head_dim;
  GemmConfig c;
  c.a = {p.dtype, d, keys, d, heads, s.kv_len * d};
  c.b = {p.dtype, d, s.q_len, d, heads, s.q_len * d};
  c.c = {scores, keys, s.q_len, keys, heads, s.q_len * keys};
  c.transpose_a = true;
  return c;
}

GemmConfig pv_gemm(const Problem& p, std::int64_t keys, DType out) {
  const Shape& s = p.shape;
  const std::int64_t heads = s.batch * s.heads, d = s.head_dim;
  GemmConfig c;
  c.a = {p.dtype, d, keys, d, heads, s.kv_len * d};
  c.b = {p.dtype, keys, s.q_len, keys, heads, s.q_len * keys};
  c.c = {out, d, s.q_len, d, heads, s.q_len * d};
  return c;
}

}  // namespace fc

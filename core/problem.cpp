#include "core/problem.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace fc {

std::string Shape::to_string() const {
  std::string s = "B" + std::to_string(batch) + " H" + std::to_string(heads);
  if (q_len == kv_len) {
    s += " S" + std::to_string(q_len);
  } else {
    s += " Sq" + std::to_string(q_len) + " Sk" + std::to_string(kv_len);
  }
  return s + " D" + std::to_string(head_dim);
}

bool Shape::operator==(const Shape& o) const {
  return batch == o.batch && heads == o.heads && q_len == o.q_len && kv_len == o.kv_len &&
         head_dim == o.head_dim;
}

std::string Mask::describe() const {
  std::string s;
  auto add = [&s](const char* part) { s += (s.empty() ? "" : "+") + std::string(part); };
  if (causal == Causal::top_left) add("causal");
  if (causal == Causal::bottom_right) add("causal-br");
  if (!key_lengths.empty()) add("padding");
  if (has_dense()) add(dense_is_bias() ? "bias" : "bool");
  return s.empty() ? "none" : s;
}

double mask_bias(const Mask& mask, const Shape& shape, std::int64_t b, std::int64_t h,
                 std::int64_t i, std::int64_t j) {
  constexpr double kMasked = -std::numeric_limits<double>::infinity();
  if (mask.causal == Causal::top_left && j > i) return kMasked;
  if (mask.causal == Causal::bottom_right && j > i + (shape.kv_len - shape.q_len)) return kMasked;
  if (!mask.key_lengths.empty() && j >= mask.key_lengths[static_cast<std::size_t>(b)]) return kMasked;
  if (!mask.has_dense()) return 0;
  const Dims& d = mask.dense.dims();
  std::int64_t bb = d[0] == 1 ? 0 : b, hh = d[1] == 1 ? 0 : h;
  std::int64_t flat = ((bb * d[1] + hh) * d[2] + i) * d[3] + j;
  double value = mask.dense.get(flat);
  if (!mask.dense_is_bias()) return value != 0 ? 0 : kMasked;
  return value;
}

double default_scale(std::int64_t head_dim) { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

void validate(const AttentionInputs& in, const std::string& origin) {
  const Shape& s = in.problem.shape;
  auto fail = [&](const std::string& what) { throw file_error(origin, what); };
  if (s.batch < 1 || s.heads < 1 || s.q_len < 1 || s.kv_len < 1 || s.head_dim < 1) {
    fail("every dimension must be at least 1, got " + s.to_string());
  }
  if (in.problem.dtype != DType::f16 && in.problem.dtype != DType::bf16 &&
      in.problem.dtype != DType::f32) {
    fail(std::string("inputs must be fp16, bf16 or fp32, got ") + dtype_name(in.problem.dtype));
  }
  const Dims q_dims{s.batch, s.heads, s.q_len, s.head_dim};
  const Dims kv_dims{s.batch, s.heads, s.kv_len, s.head_dim};
  auto check = [&](const HostTensor& t, const char* name, const Dims& want) {
    if (t.dims() != want) {
      fail(std::string(name) + " has shape " + dims_string(t.dims()) + ", expected " + dims_string(want));
    }
    if (t.dtype() != in.problem.dtype) {
      fail(std::string(name) + " is " + dtype_name(t.dtype()) + ", expected " + dtype_name(in.problem.dtype));
    }
  };
  check(in.q, "q", q_dims);
  check(in.k, "k", kv_dims);
  check(in.v, "v", kv_dims);
  if (!(in.problem.scale > 0) || !std::isfinite(in.problem.scale)) {
    fail("scale must be a positive finite number, got " + std::to_string(in.problem.scale));
  }
  const Mask& m = in.problem.mask;
  if (!m.key_lengths.empty()) {
    if (static_cast<std::int64_t>(m.key_lengths.size()) != s.batch) {
      fail("key padding lengths: " + std::to_string(m.key_lengths.size()) + " given for batch " +
           std::to_string(s.batch));
    }
    for (std::int32_t len : m.key_lengths) {
      if (len < 0 || len > s.kv_len) {
        fail("key padding length " + std::to_string(len) + " outside [0, " + std::to_string(s.kv_len) + "]");
      }
    }
  }
  if (m.has_dense()) {
    const Dims& d = m.dense.dims();
    bool ok = d.size() == 4 && (d[0] == 1 || d[0] == s.batch) && (d[1] == 1 || d[1] == s.heads) &&
              d[2] == s.q_len && d[3] == s.kv_len;
    if (!ok) {
      fail("attention mask has shape " + dims_string(d) + ", which does not broadcast to " +
           dims_string({s.batch, s.heads, s.q_len, s.kv_len}));
    }
    DType t = m.dense.dtype();
    if (t != DType::boolean && t != DType::f16 && t != DType::bf16 && t != DType::f32 && t != DType::f64) {
      fail(std::string("attention mask must be bool or floating, got ") + dtype_name(t));
    }
  }
}

}  // namespace fc

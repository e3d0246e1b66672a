#include "core/problem.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "core/head_mask.h"
#include "core/resource_usage.h"

namespace fc {

std::string Shape::to_string() const {
  std::string s = "B" + std::to_string(batch) + " H" + std::to_string(heads);
  if (kv_head_count() != heads) s += ":" + std::to_string(kv_head_count());
  if (q_len == kv_len) {
    s += " S" + std::to_string(q_len);
  } else {
    s += " Sq" + std::to_string(q_len) + " Sk" + std::to_string(kv_len);
  }
  return s + " D" + std::to_string(head_dim);
}

bool Shape::operator==(const Shape& o) const {
  return batch == o.batch && heads == o.heads && q_len == o.q_len && kv_len == o.kv_len &&
         head_dim == o.head_dim && kv_head_count() == o.kv_head_count();
}

std::string Mask::describe() const {
  std::string s;
  auto add = [&s](const char* part) { s += (s.empty() ? "" : "+") + std::string(part); };
  if (causal == Causal::top_left) add("causal");
  if (causal == Causal::bottom_right) add("causal-br");
  if (!key_lengths.empty()) add("padding");
  if (window.active()) add("window");
  if (has_alibi()) add("alibi");
  if (has_dense()) add(dense_is_bias() ? "bias" : "bool");
  return s.empty() ? "none" : s;
}

std::string Layout::describe() const {
  std::string s = varlen() ? "varlen" : "";
  if (paged()) s += (s.empty() ? "" : "+") + std::string("paged=") + std::to_string(block_size);
  return s;
}

std::int64_t Problem::q_len_of(std::int64_t b) const {
  return layout.varlen() ? layout.q_lens.at(static_cast<std::size_t>(b)) : shape.q_len;
}

std::int64_t Problem::kv_len_of(std::int64_t b) const {
  return layout.kv_lens.empty() ? shape.kv_len : layout.kv_lens.at(static_cast<std::size_t>(b));
}

std::string Problem::describe_mask() const {
  std::string s = mask.describe();
  auto add = [&s](const std::string& part) { s = (s == "none" ? "" : s + "+") + part; };
  if (softcap > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "softcap=%g", softcap);
    add(text);
  }
  if (!layout.describe().empty()) add(layout.describe());
  return s;
}

HeadMask head_mask(const Problem& p, std::int64_t b, std::int64_t h) {
  const Mask& mask = p.mask;
  HeadMask m;
  m.q_len = p.q_len_of(b);
  m.kv_len = p.kv_len_of(b);
  m.diagonal = p.diagonal_of(b);
  m.causal = mask.causal;
  if (!mask.key_lengths.empty()) m.key_length = mask.key_lengths[static_cast<std::size_t>(b)];
  m.window_left = mask.window.left;
  m.window_right = mask.window.right;
  if (mask.has_alibi()) {
    m.alibi = true;
    m.alibi_slope = mask.alibi_slopes[static_cast<std::size_t>(h)];
  }
  if (mask.has_dense()) {
    const Dims& d = mask.dense.dims();
    m.dense = true;
    m.dense_is_bias = mask.dense_is_bias();
    m.dense_offset = ((d[0] == 1 ? 0 : b) * d[1] + (d[1] == 1 ? 0 : h)) * d[2] * d[3];
    m.dense_row_stride = d[3];
  }
  return m;
}

double mask_bias(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  const HeadMask m = head_mask(p, b, h);
  return m.bias(i, j, m.dense ? p.mask.dense.get(m.dense_index(i, j)) : 0.0);
}

double default_scale(std::int64_t head_dim) { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

std::vector<double> standard_alibi_slopes(std::int64_t heads) {
  std::int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<double> slopes;
  for (std::int64_t h = 0; h < n; ++h) slopes.push_back(std::pow(2.0, -8.0 * static_cast<double>(h + 1) / n));
  for (std::int64_t h = 0; static_cast<std::int64_t>(slopes.size()) < heads; ++h) {
    slopes.push_back(std::pow(2.0, -8.0 * static_cast<double>(2 * h + 1) / (2 * n)));
  }
  return slopes;
}

void validate_problem(const Problem& p, const std::string& origin) {
  const Shape& s = p.shape;
  auto fail = [&](const std::string& what) { throw file_error(origin, what); };
  if (s.batch < 1 || s.heads < 1 || s.q_len < 1 || s.kv_len < 1 || s.head_dim < 1 || s.kv_heads < 0) {
    fail("every dimension must be at least 1, got " + s.to_string());
  }
  if (s.heads % s.kv_head_count() != 0) {
    fail("query heads (" + std::to_string(s.heads) + ") must be a multiple of K/V heads (" +
         std::to_string(s.kv_head_count()) + ")");
  }
  if (p.dtype != DType::f16 && p.dtype != DType::bf16 && p.dtype != DType::f32) {
    fail(std::string("inputs must be fp16, bf16 or fp32, got ") + dtype_name(p.dtype));
  }
  // Q, K, V and the output alone, before any reference or capture: a case that cannot fit the
  // machine is refused here, in one line, rather than as a failed allocation somewhere later.
  const double tensor_bytes = (2.0 * static_cast<double>(s.batch) * s.heads * s.q_len +
                               2.0 * static_cast<double>(s.batch) * s.kv_head_count() * s.kv_len) *
                              static_cast<double>(s.head_dim) * static_cast<double>(dtype_size(p.dtype));
  const double host_bytes = static_cast<double>(physical_host_bytes());
  if (host_bytes > 0 && tensor_bytes > host_bytes) {
    char text[160];
    std::snprintf(text, sizeof text, "its q, k, v and output need %.1f GiB of host memory; this machine has %.1f GiB",
                  tensor_bytes / (1 << 30), host_bytes / (1 << 30));
    fail(text);
  }
  if (!(p.scale > 0) || !std::isfinite(p.scale)) {
    fail("scale must be a positive finite number, got " + std::to_string(p.scale));
  }
  if (p.softcap < 0 || !std::isfinite(p.softcap)) {
    fail("softcap must be a positive finite number (0: none), got " + std::to_string(p.softcap));
  }
  const Mask& m = p.mask;
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
  for (const std::int64_t side : {m.window.left, m.window.right}) {
    if (side < -1) fail("window (" + std::to_string(m.window.left) + ", " + std::to_string(m.window.right) +
                        "): each side must be >= 0, or -1 for unbounded");
  }
  if (m.has_alibi()) {
    if (static_cast<std::int64_t>(m.alibi_slopes.size()) != s.heads) {
      fail("ALiBi: " + std::to_string(m.alibi_slopes.size()) + " slopes given for " + std::to_string(s.heads) +
           " query heads");
    }
    for (double slope : m.alibi_slopes) {
      if (!std::isfinite(slope)) fail("ALiBi slopes must be finite");
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

  const Layout& l = p.layout;
  if (l.q_lens.empty() != l.kv_lens.empty()) fail("varlen: both query and key lengths are needed");
  if (l.varlen()) {
    if (static_cast<std::int64_t>(l.q_lens.size()) != s.batch || static_cast<std::int64_t>(l.kv_lens.size()) != s.batch) {
      fail("varlen: " + std::to_string(l.q_lens.size()) + " query and " + std::to_string(l.kv_lens.size()) +
           " key lengths given for batch " + std::to_string(s.batch));
    }
    for (std::int64_t b = 0; b < s.batch; ++b) {
      const std::int64_t q = l.q_lens[static_cast<std::size_t>(b)], k = l.kv_lens[static_cast<std::size_t>(b)];
      if (q < 0 || q > s.q_len || k < 0 || k > s.kv_len) {
        fail("varlen: sequence " + std::to_string(b) + " has " + std::to_string(q) + " query rows and " +
             std::to_string(k) + " keys, outside [0, " + std::to_string(s.q_len) + "] and [0, " +
             std::to_string(s.kv_len) + "]");
      }
    }
  }
  if (l.block_size < 0) fail("paged KV: block size must be positive");
  if (l.paged()) {
    if (l.num_blocks < 1 || l.max_blocks < 1 || static_cast<std::int64_t>(l.block_table.size()) != s.batch * l.max_blocks) {
      fail("paged KV: the block table must be [" + std::to_string(s.batch) + ", max_blocks] over at least one block");
    }
    for (std::int64_t b = 0; b < s.batch; ++b) {
      const std::int64_t used = (p.kv_len_of(b) + l.block_size - 1) / l.block_size;
      if (used > l.max_blocks) {
        fail("paged KV: sequence " + std::to_string(b) + " has " + std::to_string(p.kv_len_of(b)) + " keys, more than " +
             std::to_string(l.max_blocks) + " blocks of " + std::to_string(l.block_size) + " hold");
      }
      for (std::int64_t j = 0; j < used; ++j) {
        const std::int32_t block = l.block_table[static_cast<std::size_t>(b * l.max_blocks + j)];
        if (block < 0 || block >= l.num_blocks) {
          fail("paged KV: block_table[" + std::to_string(b) + "][" + std::to_string(j) + "] = " + std::to_string(block) +
               " is outside [0, " + std::to_string(l.num_blocks) + ")");
        }
      }
    }
  }
}

void validate(const AttentionInputs& in, const std::string& origin) {
  validate_problem(in.problem, origin);
  const Shape& s = in.problem.shape;
  auto fail = [&](const std::string& what) { throw file_error(origin, what); };
  const Dims q_dims{s.batch, s.heads, s.q_len, s.head_dim};
  const Dims kv_dims{s.batch, s.kv_head_count(), s.kv_len, s.head_dim};
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
}

}  // namespace fc

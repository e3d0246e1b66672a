#include "harness/inputs.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"

namespace fc {
namespace {

// Independent random streams of one seed.
enum Stream : std::uint64_t { kQ = 1, kK = 2, kV = 3, kMask = 4 };

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, sep)) parts.push_back(part);
  return parts;
}

std::int64_t parse_positive(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < 1) throw Error(what + ": '" + text + "' is not a positive integer");
  return v;
}

// Element scale of each distribution for tensor `which` (q, k or v).
double element_scale(const std::string& dist, DType dtype, std::int64_t head_dim, Stream which) {
  if (dist == "large" && which != kV) {
    // std(q.k) = sigma^2 sqrt(D) = 16384: the row maxima of unscaled scores approach the
    // fp16 limit 65504 (4 sigma), so fp16 score storage overflows on some rows.
    return std::sqrt(16384.0 / std::sqrt(static_cast<double>(head_dim)));
  }
  if (dist == "tiny") {
    // Inside the subnormal range of the element format.
    return dtype == DType::f16 ? std::ldexp(1.0, -20) : std::ldexp(1.0, -130);
  }
  return 1.0;
}

HostTensor draw(const CaseSpec& spec, const Dims& dims, Stream which) {
  Rng rng(spec.seed, which);
  HostTensor t(spec.dtype, dims);
  const double scale = element_scale(spec.dist, spec.dtype, spec.shape.head_dim, which);
  const bool uniform = spec.dist == "uniform";
  const std::int64_t n = t.numel();
  for (std::int64_t i = 0; i < n; ++i) t.set(i, scale * (uniform ? rng.uniform(-1, 1) : rng.normal()));
  if (spec.dist == "outlier") {
    // About one element in a thousand, at least one, made 100x larger.
    const std::int64_t count = std::max<std::int64_t>(1, n / 1000);
    for (std::int64_t c = 0; c < count; ++c) {
      const std::int64_t i = rng.below(n);
      t.set(i, 100.0 * t.get(i));
    }
  }
  return t;
}

HostTensor random_bool_mask(const Shape& s, Rng& rng) {
  HostTensor m(DType::boolean, {s.batch, s.heads, s.q_len, s.kv_len});
  for (std::int64_t i = 0; i < m.numel(); ++i) m.set(i, rng.uniform() < 0.7 ? 1 : 0);
  return m;
}

HostTensor random_bias(const Shape& s, Rng& rng) {
  HostTensor m(DType::f32, {1, s.heads, s.q_len, s.kv_len});
  for (std::int64_t i = 0; i < m.numel(); ++i) {
    m.set(i, rng.uniform() < 0.1 ? -INFINITY : rng.normal());
  }
  return m;
}

// Masks a few whole query rows through the dense boolean part (creating it if needed).
void mask_random_rows(Mask& mask, const Shape& s, Rng& rng) {
  if (!mask.has_dense()) {
    mask.dense = HostTensor(DType::boolean, {s.batch, s.heads, s.q_len, s.kv_len});
    for (std::int64_t i = 0; i < mask.dense.numel(); ++i) mask.dense.set(i, 1);
  }
  if (mask.dense_is_bias()) throw Error("mask: masked-rows cannot be combined with bias");
  const Dims& d = mask.dense.dims();
  const std::int64_t rows = std::max<std::int64_t>(1, s.q_len / 8);
  for (std::int64_t bh = 0; bh < d[0] * d[1]; ++bh) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t row = rng.below(s.q_len);
      for (std::int64_t j = 0; j < s.kv_len; ++j) mask.dense.set((bh * s.q_len + row) * s.kv_len + j, 0);
    }
  }
}

}  // namespace

std::string CaseSpec::label() const {
  std::string s = shape.to_string() + " " + dtype_name(dtype) + " " + mask + " " + dist + " seed " + std::to_string(seed);
  if (scale) s += " scale " + std::to_string(*scale);
  return s;
}

Shape parse_shape(const std::string& text) {
  std::vector<std::string> parts = split(text, ',');
  if (parts.size() != 4 && parts.size() != 5) {
    throw Error("--shape '" + text + "': expected B,H,S,D or B,H,Sq,Sk,D");
  }
  std::vector<std::int64_t> v;
  for (const std::string& p : parts) v.push_back(parse_positive(p, "--shape '" + text + "'"));
  Shape s;
  s.batch = v[0];
  s.heads = v[1];
  s.q_len = v[2];
  s.kv_len = parts.size() == 5 ? v[3] : v[2];
  s.head_dim = v.back();
  return s;
}

const std::vector<std::string>& distribution_names() {
  static const std::vector<std::string> names{"normal", "uniform", "large", "outlier", "tiny"};
  return names;
}

std::string mask_help() {
  return "parts joined by '+': none, causal (top-left), causal-br (bottom-right), "
         "padding (random key lengths per batch) or padding=L1,L2,.. (one per batch), "
         "bool (random boolean mask), bias (random additive bias with -inf), "
         "masked-rows (a few query rows with no key)";
}

Mask make_mask(const std::string& spec, const Shape& shape, std::uint64_t seed) {
  Rng rng(seed, kMask);
  Mask mask;
  for (const std::string& part : split(spec, '+')) {
    if (part == "none") continue;
    if (part == "causal") {
      mask.causal = Causal::top_left;
    } else if (part == "causal-br") {
      mask.causal = Causal::bottom_right;
    } else if (part == "padding") {
      for (std::int64_t b = 0; b < shape.batch; ++b) {
        mask.key_lengths.push_back(static_cast<std::int32_t>(1 + rng.below(shape.kv_len)));
      }
    } else if (part.rfind("padding=", 0) == 0) {
      for (const std::string& len : split(part.substr(8), ',')) {
        std::size_t used = 0;
        int v = -1;
        try {
          v = std::stoi(len, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != len.size() || v < 0) throw Error("--mask '" + spec + "': bad key length '" + len + "'");
        mask.key_lengths.push_back(v);
      }
    } else if (part == "bool") {
      if (mask.has_dense()) throw Error("--mask '" + spec + "': only one of bool, bias");
      mask.dense = random_bool_mask(shape, rng);
    } else if (part == "bias") {
      if (mask.has_dense()) throw Error("--mask '" + spec + "': only one of bool, bias");
      mask.dense = random_bias(shape, rng);
    } else if (part == "masked-rows") {
      mask_random_rows(mask, shape, rng);
    } else {
      throw Error("--mask '" + spec + "': unknown part '" + part + "' (" + mask_help() + ")");
    }
  }
  return mask;
}

Problem make_problem(const CaseSpec& spec) {
  bool known = false;
  for (const std::string& d : distribution_names()) known = known || d == spec.dist;
  if (!known) throw Error("--dist '" + spec.dist + "': unknown (normal, uniform, large, outlier, tiny)");
  Problem p;
  p.shape = spec.shape;
  p.dtype = spec.dtype;
  p.scale = spec.scale ? *spec.scale : default_scale(spec.shape.head_dim);
  p.mask = make_mask(spec.mask, spec.shape, spec.seed);
  return p;
}

AttentionInputs generate_inputs(const CaseSpec& spec) {
  AttentionInputs in;
  const Shape& s = spec.shape;
  in.problem = make_problem(spec);
  in.q = draw(spec, {s.batch, s.heads, s.q_len, s.head_dim}, kQ);
  in.k = draw(spec, {s.batch, s.heads, s.kv_len, s.head_dim}, kK);
  in.v = draw(spec, {s.batch, s.heads, s.kv_len, s.head_dim}, kV);
  in.source = "seed " + std::to_string(spec.seed) + ", dist " + spec.dist;
  validate(in, "case " + spec.label());
  return in;
}

}  // namespace fc

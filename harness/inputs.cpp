#include "harness/inputs.h"

#include <cmath>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/numeric.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace fc {
namespace {

// Independent random streams of one seed.
enum Stream : std::uint64_t { kQ = 1, kK = 2, kV = 3, kMask = 4, kLayout = 5 };

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, sep)) parts.push_back(part);
  return parts;
}

std::int64_t parse_integer(const std::string& text, std::int64_t least, const std::string& what) {
  std::size_t used = 0;
  long long v = least - 1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v < least) {
    throw Error(what + ": '" + text + "' is not " + (least == 1 ? "a positive integer" : "an integer >= " + std::to_string(least)));
  }
  return v;
}

std::int64_t parse_positive(const std::string& text, const std::string& what) { return parse_integer(text, 1, what); }

double parse_number(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !std::isfinite(v)) throw Error(what + ": '" + text + "' is not a finite number");
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

// The most negative finite value of the input format: what torch.finfo(dtype).min gives
// Hugging Face's masks.
double finfo_min(DType dtype) { return -max_finite(dtype); }

// Every masked (-inf) score of the mask parts as the finite bias `value` instead, in one
// dense fp32 bias, as Hugging Face builds its additive masks. ALiBi stays a part of its own.
void fold_into_finite_bias(MaskSpec& m, const Shape& s, double value) {
  Problem p;
  p.shape = s;
  p.mask = m.mask;
  p.mask.alibi_slopes.clear();
  p.layout = m.layout;
  const std::int64_t heads = m.mask.has_dense() ? m.mask.dense.dim(1) : 1;
  HostTensor dense(DType::f32, {s.batch, heads, s.q_len, s.kv_len});
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < s.q_len; ++i)
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          const double bias = mask_bias(p, b, h, i, j);
          dense.set(((b * heads + h) * s.q_len + i) * s.kv_len + j, std::isinf(bias) ? value : bias);
        }
  const std::vector<double> alibi = m.mask.alibi_slopes;
  m.mask = Mask();
  m.mask.alibi_slopes = alibi;
  m.mask.dense = std::move(dense);
}

// Sequence lengths for `varlen`: each in [1, S], a few sequences of no rows or no keys.
void random_lengths(Layout& l, const Shape& s, Rng& rng) {
  for (std::int64_t b = 0; b < s.batch; ++b) {
    l.q_lens.push_back(static_cast<std::int32_t>(rng.uniform() < 0.15 ? 0 : 1 + rng.below(s.q_len)));
    l.kv_lens.push_back(static_cast<std::int32_t>(rng.uniform() < 0.1 ? 0 : 1 + rng.below(s.kv_len)));
  }
}

// A paged KV cache of blocks of `block_size`: every entry of the table (used or not) a
// different physical block, in shuffled order, and two blocks to spare.
void random_block_table(Layout& l, const Shape& s, std::int64_t block_size, Rng& rng) {
  l.block_size = block_size;
  l.max_blocks = (s.kv_len + block_size - 1) / block_size;
  l.num_blocks = s.batch * l.max_blocks + 2;
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(l.num_blocks));
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::int32_t>(i);
  for (std::size_t i = blocks.size(); i > 1; --i) {
    std::swap(blocks[i - 1], blocks[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(i)))]);
  }
  l.block_table.assign(blocks.begin(), blocks.begin() + s.batch * l.max_blocks);
}

}  // namespace

std::string CaseSpec::label() const {
  std::string s = shape.to_string() + " " + dtype_name(dtype) + " " + mask + " " + dist + " seed " + std::to_string(seed);
  if (scale) s += " scale " + std::to_string(*scale);
  return s;
}

std::string shape_argument(const Shape& s) {
  std::string heads = std::to_string(s.heads);
  if (s.kv_head_count() != s.heads) heads += ":" + std::to_string(s.kv_head_count());
  return std::to_string(s.batch) + "," + heads + "," + std::to_string(s.q_len) + "," + std::to_string(s.kv_len) + "," +
         std::to_string(s.head_dim);
}

Shape parse_shape(const std::string& text) {
  std::vector<std::string> parts = split(text, ',');
  if (parts.size() != 4 && parts.size() != 5) {
    throw Error("--shape '" + text + "': expected B,H,S,D or B,H,Sq,Sk,D (H as Hq:Hkv for GQA)");
  }
  const std::string what = "--shape '" + text + "'";
  const std::vector<std::string> heads = split(parts[1], ':');
  const bool gqa = parts[1].find(':') != std::string::npos;
  if (heads.empty() || (gqa && !(heads.size() == 2 && parts[1].back() != ':'))) {
    throw Error(what + ": heads are H or Hq:Hkv, got '" + parts[1] + "'");
  }
  Shape s;
  s.batch = parse_positive(parts[0], what);
  s.heads = parse_positive(heads[0], what);
  if (heads.size() == 2) s.kv_heads = parse_positive(heads[1], what);
  s.q_len = parse_positive(parts[2], what);
  s.kv_len = parts.size() == 5 ? parse_positive(parts[3], what) : s.q_len;
  s.head_dim = parse_positive(parts.back(), what);
  if (s.heads % s.kv_head_count() != 0) {
    throw Error(what + ": query heads " + std::to_string(s.heads) + " are not a multiple of K/V heads " +
                std::to_string(s.kv_head_count()));
  }
  return s;
}

const std::vector<std::string>& distribution_names() {
  static const std::vector<std::string> names{"normal", "uniform", "large", "outlier", "tiny"};
  return names;
}

std::string mask_help() {
  return "parts joined by '+', each kind once: none, causal (top-left), causal-br (bottom-right), "
         "padding (random key lengths per batch) or padding=L1,L2,.. (one per batch), "
         "bool (random boolean mask), bias (random additive bias with -inf), "
         "masked-rows (a few query rows with no key), "
         "window=L,R (sliding window as flash_attn's window_size, bottom-right aligned, -1 unbounded), "
         "alibi (standard slopes) or alibi=S1,S2,.. (one per query head), "
         "softcap=C (s = C tanh(s/C) before the mask), "
         "masked-bias=V (every masked score as the finite bias V instead of -inf, as Hugging Face masks; "
         "V a number or min, the input format's most negative value), "
         "varlen (random sequence lengths, some empty) or varlen=Q1:K1,Q2:K2,.. (one per batch; packed "
         "with cu_seqlens for the kernels that read them so), "
         "paged=BS (K/V in a paged cache of blocks of BS keys behind a shuffled block table)";
}

MaskSpec parse_mask_spec(const std::string& spec, const Shape& shape, DType dtype, std::uint64_t seed) {
  Rng rng(seed, kMask), layout_rng(seed, kLayout);
  MaskSpec result;
  Mask& mask = result.mask;
  std::optional<double> masked_bias;
  std::int64_t block_size = 0;
  const std::string what = "--mask '" + spec + "'";
  std::set<std::string> kinds;  // each kind of part once: a second would silently replace the first
  for (const std::string& part : split(spec, '+')) {
    const std::size_t eq = part.find('=');
    const std::string name = part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    if (part == "none") continue;
    const std::string kind = name == "causal-br" ? "causal" : name == "bias" ? "bool" : name;
    if (!kinds.insert(kind).second) {
      throw Error(what + ": '" + part + "' after another " + (kind == "bool" ? "bool or bias" : kind) + " part");
    }
    if (eq != std::string::npos && value.empty()) throw Error(what + ": '" + part + "' has no value");
    if (name == "window" && eq != std::string::npos) {
      const std::vector<std::string> sides = split(value, ',');
      if (sides.size() != 2) throw Error(what + ": window=L,R needs two sides");
      mask.window.left = parse_integer(sides[0], -1, what + " window left");
      mask.window.right = parse_integer(sides[1], -1, what + " window right");
      if (!mask.window.active()) throw Error(what + ": window=-1,-1 is no window (give none)");
      continue;
    }
    if (part == "alibi") {
      mask.alibi_slopes = standard_alibi_slopes(shape.heads);
      continue;
    }
    if (name == "alibi" && eq != std::string::npos) {
      for (const std::string& slope : split(value, ',')) mask.alibi_slopes.push_back(parse_number(slope, what + " ALiBi slope"));
      continue;
    }
    if (name == "softcap" && eq != std::string::npos) {
      result.softcap = parse_number(value, what + " softcap");
      if (result.softcap <= 0) throw Error(what + ": softcap must be positive, got " + value);
      continue;
    }
    if (name == "masked-bias" && eq != std::string::npos) {
      masked_bias = value == "min" ? finfo_min(dtype) : parse_number(value, what + " masked-bias");
      if (*masked_bias >= 0) throw Error(what + ": masked-bias must be negative, got " + value);
      continue;
    }
    if (part == "varlen") {
      random_lengths(result.layout, shape, layout_rng);
      continue;
    }
    if (name == "varlen" && eq != std::string::npos) {
      for (const std::string& pair : split(value, ',')) {
        const std::vector<std::string> qk = split(pair, ':');
        if (qk.size() != 2) throw Error(what + ": varlen lengths are Q:K pairs, got '" + pair + "'");
        result.layout.q_lens.push_back(static_cast<std::int32_t>(parse_integer(qk[0], 0, what + " query length")));
        result.layout.kv_lens.push_back(static_cast<std::int32_t>(parse_integer(qk[1], 0, what + " key length")));
      }
      continue;
    }
    if (name == "paged" && eq != std::string::npos) {
      block_size = parse_positive(value, what + " block size");
      continue;
    }
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
      mask.dense = random_bool_mask(shape, rng);
    } else if (part == "bias") {
      mask.dense = random_bias(shape, rng);
    } else if (part == "masked-rows") {
      mask_random_rows(mask, shape, rng);
    } else {
      throw Error("--mask '" + spec + "': unknown part '" + part + "' (" + mask_help() + ")");
    }
  }
  if (result.layout.varlen() && static_cast<std::int64_t>(result.layout.q_lens.size()) != shape.batch) {
    throw Error(what + ": varlen gives " + std::to_string(result.layout.q_lens.size()) + " sequences for batch " +
                std::to_string(shape.batch));
  }
  for (std::size_t b = 0; b < result.layout.q_lens.size(); ++b) {
    if (result.layout.q_lens[b] > shape.q_len || result.layout.kv_lens[b] > shape.kv_len) {
      throw Error(what + ": sequence " + std::to_string(b) + " is longer than the shape's Sq " +
                  std::to_string(shape.q_len) + " or Sk " + std::to_string(shape.kv_len));
    }
  }
  if (block_size > 0) random_block_table(result.layout, shape, block_size, layout_rng);
  if (masked_bias) fold_into_finite_bias(result, shape, *masked_bias);
  return result;
}

Mask make_mask(const std::string& spec, const Shape& shape, std::uint64_t seed) {
  return parse_mask_spec(spec, shape, DType::f16, seed).mask;
}

Problem make_problem(const CaseSpec& spec) {
  bool known = false;
  for (const std::string& d : distribution_names()) known = known || d == spec.dist;
  if (!known) throw Error("--dist '" + spec.dist + "': unknown (normal, uniform, large, outlier, tiny)");
  Problem p;
  p.shape = spec.shape;
  p.dtype = spec.dtype;
  p.scale = spec.scale ? *spec.scale : default_scale(spec.shape.head_dim);
  MaskSpec m = parse_mask_spec(spec.mask, spec.shape, spec.dtype, spec.seed);
  p.mask = std::move(m.mask);
  p.softcap = m.softcap;
  p.layout = std::move(m.layout);
  validate_problem(p, "case " + spec.label());
  return p;
}

namespace {
// Rows [from, S) of each head of sequence b set to 0: a padded tensor's rows that do not exist.
void zero_past(HostTensor& t, std::int64_t b, std::int64_t from) {
  const Dims& d = t.dims();
  for (std::int64_t h = 0; h < d[1]; ++h)
    for (std::int64_t r = from; r < d[2]; ++r)
      for (std::int64_t c = 0; c < d[3]; ++c) t.set(((b * d[1] + h) * d[2] + r) * d[3] + c, 0);
}
}  // namespace

AttentionInputs generate_inputs(const CaseSpec& spec) {
  AttentionInputs in;
  const Shape& s = spec.shape;
  in.problem = make_problem(spec);
  // Each tensor is its own stream of the seed: drawn at once, the same numbers.
  HostTensor* const tensors[] = {&in.q, &in.k, &in.v};
  const Stream streams[] = {kQ, kK, kV};
  parallel_for(3, [&](std::int64_t i) {
    const std::int64_t heads = i == 0 ? s.heads : s.kv_head_count(), rows = i == 0 ? s.q_len : s.kv_len;
    *tensors[i] = draw(spec, {s.batch, heads, rows, s.head_dim}, streams[i]);
  });
  if (in.problem.layout.varlen()) {
    for (std::int64_t b = 0; b < s.batch; ++b) {
      zero_past(in.q, b, in.problem.q_len_of(b));
      zero_past(in.k, b, in.problem.kv_len_of(b));
      zero_past(in.v, b, in.problem.kv_len_of(b));
    }
  }
  in.source = "seed " + std::to_string(spec.seed) + ", dist " + spec.dist;
  validate(in, "case " + spec.label());
  return in;
}

}  // namespace fc

#include "harness/random_cases.h"

#include <algorithm>
#include <vector>

#include "core/rng.h"

namespace fc {
namespace {
template <class T>
const T& pick(Rng& rng, const std::vector<T>& options) {
  return options[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(options.size())))];
}

// The attention people run, each feature in a share of the cases: a sliding window, a
// softcap, ALiBi, Hugging Face's finite masking biases, variable lengths (empty sequences
// too), a paged KV cache. Parts appended to the mask spec, joined by '+'.
std::string feature_parts(Rng& rng, const Shape& s) {
  std::string parts;
  auto add = [&parts](const std::string& part) { parts += "+" + part; };
  if (rng.uniform() < 0.2) {
    const std::int64_t left = rng.uniform() < 0.2 ? -1 : rng.below(s.kv_len + 1);
    const std::int64_t right = left >= 0 && rng.uniform() < 0.4 ? -1 : rng.below(std::min<std::int64_t>(s.kv_len, 8) + 1);
    add("window=" + std::to_string(left) + "," + std::to_string(right));
  }
  if (rng.uniform() < 0.15) add("softcap=" + pick(rng, std::vector<std::string>{"5", "20", "50"}));
  if (rng.uniform() < 0.15) add("alibi");
  if (rng.uniform() < 0.2) add("varlen");
  if (rng.uniform() < 0.15) add("paged=" + pick(rng, std::vector<std::string>{"16", "32", "64", "128", "256"}));
  if (rng.uniform() < 0.15) add("masked-bias=" + pick(rng, std::vector<std::string>{"-1e4", "-65504", "min", "-1e9"}));
  return parts;
}
}  // namespace

RandomCase random_case(std::uint64_t seed, bool small) {
  Rng rng(seed, 99);
  RandomCase c;
  CaseSpec& s = c.spec;
  s.seed = seed;
  s.dtype = pick(rng, std::vector<DType>{DType::f16, DType::bf16});
  s.shape.batch = 1 + rng.below(2);
  // Query heads per K/V head: GQA (or MQA) in a third of the cases.
  s.shape.kv_heads = 1 + rng.below(small ? 1 : 2);
  s.shape.heads = s.shape.kv_heads * pick(rng, small ? std::vector<std::int64_t>{1, 1, 2} : std::vector<std::int64_t>{1, 1, 2, 4});
  if (small && s.shape.heads == 1 && rng.uniform() < 0.5) s.shape.heads = s.shape.kv_heads = 2;
  s.shape.q_len = 1 + rng.below(small ? 40 : 300);
  s.shape.kv_len = rng.uniform() < 0.5 ? s.shape.q_len : 1 + rng.below(small ? 150 : 600);
  // The head dims the fused kernels build, most often, and others that real models and
  // FlashAttention's tests use.
  s.shape.head_dim = rng.uniform() < 0.8 ? pick(rng, std::vector<std::int64_t>{32, 64, 64, 64, 96, 128, 128, 256})
                                         : pick(rng, std::vector<std::int64_t>{1, 8, 40, 59, 80, 111, 160});
  s.mask = pick(rng, std::vector<std::string>{"none", "causal", "causal-br", "padding", "bool", "bias",
                                               "causal+padding", "bool+masked-rows", "padding=0"});
  if (s.mask == "padding=0") {  // a batch with no keys at all, the others whole
    for (std::int64_t b = 1; b < s.shape.batch; ++b) s.mask += "," + std::to_string(s.shape.kv_len);
  }
  s.mask += feature_parts(rng, s.shape);
  s.dist = pick(rng, distribution_names());
  c.tile_width = pick(rng, std::vector<std::int64_t>{16, 32, 64, 128});
  c.splits = 1 + rng.below(4);
  c.score_format = pick(rng, std::vector<DType>{DType::f32, DType::f32, s.dtype});
  c.p_format = pick(rng, std::vector<DType>{DType::f32, s.dtype});
  c.operand = pick(rng, std::vector<DType>{DType::f32, s.dtype});
  c.tensor_cores = rng.uniform() < 0.25;
  return c;
}

RandomCase random_long_case(std::uint64_t seed) {
  RandomCase c = random_case(seed);
  Rng rng(seed, 7331);
  Shape& s = c.spec.shape;
  s.q_len = 1 + rng.below(64);
  s.kv_len = 4096 + rng.below(16384 - 4096 + 1);  // explicit padding lengths stay valid: they only grew
  c.tile_width = std::max<std::int64_t>(c.tile_width, 64);
  return c;
}

}  // namespace fc

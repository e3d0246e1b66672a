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
}  // namespace

RandomCase random_case(std::uint64_t seed, bool small) {
  Rng rng(seed, 99);
  RandomCase c;
  CaseSpec& s = c.spec;
  s.seed = seed;
  s.dtype = pick(rng, std::vector<DType>{DType::f16, DType::bf16});
  s.shape.batch = 1 + rng.below(2);
  s.shape.heads = 1 + rng.below(2);
  s.shape.q_len = 1 + rng.below(small ? 40 : 300);
  s.shape.kv_len = rng.uniform() < 0.5 ? s.shape.q_len : 1 + rng.below(small ? 150 : 600);
  s.shape.head_dim = pick(rng, std::vector<std::int64_t>{64, 128});
  s.mask = pick(rng, std::vector<std::string>{"none", "causal", "causal-br", "padding", "bool", "bias",
                                               "causal+padding", "bool+masked-rows", "padding=0"});
  if (s.mask == "padding=0") {  // a batch with no keys at all, the others whole
    for (std::int64_t b = 1; b < s.shape.batch; ++b) s.mask += "," + std::to_string(s.shape.kv_len);
  }
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
  s.kv_len = 4096 + rng.below(16384 - 4096 + 1);
  if (c.spec.mask.rfind("padding=", 0) == 0) c.spec.mask = "padding";
  c.tile_width = std::max<std::int64_t>(c.tile_width, 64);
  return c;
}

}  // namespace fc

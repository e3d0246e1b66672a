#pragma once
// Seeded random numbers that give the same bits on every machine: xoshiro256** seeded by
// splitmix64, and only exact IEEE operations afterwards (no libm), so a seed names an input.
#include <cstdint>

namespace fc {

class Rng {
 public:
  // `stream` separates independent sequences drawn from one seed (q, k, v, mask, ...).
  explicit Rng(std::uint64_t seed, std::uint64_t stream = 0) {
    std::uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (auto& s : state_) s = splitmix(x);
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(uniform() * static_cast<double>(n)); }

  // Irwin-Hall sum of 12 uniforms: mean 0, variance 1, support [-6, 6]. Exact arithmetic
  // only, which Box-Muller (log, cos) cannot promise across libm versions.
  double normal() {
    double sum = 0;
    for (int i = 0; i < 12; ++i) sum += uniform();
    return sum - 6.0;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t state_[4];
};

}  // namespace fc

// The online softmax's phases (reference/stage_math.h), run in the order the GPU reference runs
// them over a stack of tiles (reference/gpu/chain_kernels.cu: each tile's phase for every tile,
// the running max, sum and the sum's errors carried row by row, the tile's stats taken before
// the running max is known), give bit for bit what online_softmax_row (the same phases, a tile
// at a time) gives tile after tile, each tile reading the stored outputs of the tile before. It
// checks the order and the carries; the phases' arithmetic is the reference tests' to check.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "catch.h"
#include "reference/stage_math.h"

namespace fc::stage_math {
namespace {

// A bounded stack [items, cols] (item t * rows + r: tile t of row r).
struct Stack {
  std::int64_t cols;
  std::vector<double> value, worst, tight;
  Stack(std::int64_t items, std::int64_t c)
      : cols(c), value(static_cast<std::size_t>(items * c)), worst(value.size()), tight(value.size()) {}
  RowIn in(std::int64_t i) const { return {&value[i * cols], {&worst[i * cols], &tight[i * cols]}}; }
  RowOut out(std::int64_t i) { return {&value[i * cols], {&worst[i * cols], &tight[i * cols]}}; }
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != a[i] && b[i] != b[i]) continue;  // NaN either way (its sign may differ)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0) return false;
  }
  return true;
}
bool same_bits(const Stack& a, const Stack& b) {
  return same_bits(a.value, b.value) && same_bits(a.worst, b.worst) && same_bits(a.tight, b.tight);
}

}  // namespace

TEST_CASE("the online softmax's phases run over a stack, carries row by row, equal them run tile after tile",
          "[reference]") {
  const std::int64_t rows = 6, tiles = 40, cols = 16, items = rows * tiles;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0, 3);
  std::uniform_real_distribution<double> uniform(0, 1);
  Stack s(items, cols);
  for (std::int64_t t = 0; t < tiles; ++t) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = t * rows + r;
      // Row 1 attends nothing in its first 5 tiles, row 2 nothing at all; row 3 has a NaN in tile
      // 30; a tile in ten is masked throughout; every row's scores climb now and then, so that its
      // running max moves and its error reaches back into earlier tiles.
      const bool masked = (r == 1 && t < 5) || r == 2 || uniform(rng) < 0.1;
      const double climb = uniform(rng) < 0.2 ? 0.5 * static_cast<double>(t) : 0.0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::size_t e = static_cast<std::size_t>(i * cols + c);
        s.value[e] = masked || uniform(rng) < 0.2 ? -HUGE_VAL : normal(rng) + climb;
        if (r == 3 && t == 30 && c == 7) s.value[e] = std::nan("");
        s.worst[e] = std::fabs(normal(rng)) * (uniform(rng) < 0.1 ? 1.0 : 1e-6);
        s.tight[e] = s.worst[e] * uniform(rng);
      }
    }
  }
  OutputTerms k;
  k.u_out = 4.8828125e-4;
  k.eta_out = 5.96e-8;
  k.eta_f32 = 1.4e-45;

  // Tile after tile, each row's tile reading the outputs of its tile before.
  Stack p1(items, cols), max1(items, 1), sum1(items, 1), rescale1(items, 1);
  const double no_max = -HUGE_VAL, no_sum = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    RowIn prev_max{&no_max, {nullptr, nullptr}}, prev_sum{&no_sum, {nullptr, nullptr}};
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t i = t * rows + r;
      online_softmax_row(SerialTeam{}, cols, s.in(i), prev_max, prev_sum, p1.out(i), max1.out(i), sum1.out(i),
                         rescale1.out(i), k);
      prev_max = max1.in(i);
      prev_sum = sum1.in(i);
    }
  }

  // In phases, as the GPU kernels run them.
  Stack p2(items, cols), max2(items, 1), sum2(items, 1), rescale2(items, 1);
  std::vector<OnlineTileStats> stats(static_cast<std::size_t>(items));
  std::vector<MaxStep> steps(stats.size());
  std::vector<OnlineTileSums> sums(stats.size());
  std::vector<double> stagnated(stats.size());
  const double unknown[2] = {-HUGE_VAL, -HUGE_VAL};
  for (std::int64_t i = 0; i < items; ++i) stats[i] = online_tile_stats(SerialTeam{}, cols, s.in(i), unknown);
  for (std::int64_t r = 0; r < rows; ++r) {
    RunningMax carry{-HUGE_VAL, {0, 0}};
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t i = t * rows + r;
      steps[i] = online_max_step(SerialTeam{}, carry, stats[i], cols, s.in(i));
      carry = steps[i].after();
    }
  }
  for (std::int64_t i = 0; i < items; ++i) {
    sums[i] = online_tile_values(SerialTeam{}, cols, s.in(i), steps[i], p2.out(i), max2.out(i), rescale2.out(i), k);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    double carry = 0;
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t i = t * rows + r;
      sum2.value[i] = carry = online_sum_value(carry, steps[i], sums[i]);
    }
  }
  for (std::int64_t i = 0; i < items; ++i) {
    stagnated[i] = online_stagnation(SerialTeam{}, cols, s.in(i), &p2.value[i * cols], sum2.value[i]);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    RunningSum carry{0, {0, 0}};
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t i = t * rows + r;
      carry = online_sum_step(carry, steps[i], sums[i], sum2.value[i], stagnated[i], k);
      sum2.worst[i] = carry.error[kWorst];
      sum2.tight[i] = carry.error[kTight];
    }
  }

  CHECK(same_bits(p1, p2));
  CHECK(same_bits(max1, max2));
  CHECK(same_bits(sum1, sum2));
  CHECK(same_bits(rescale1, rescale2));
  // The cases the stack was built for occurred.
  CHECK(max1.value[0 * rows + 1] == -HUGE_VAL);             // row 1, nothing attended yet
  CHECK(max1.value[(tiles - 1) * rows + 2] == -HUGE_VAL);   // row 2, nothing ever
  CHECK(std::isnan(max1.value[(tiles - 1) * rows + 3]));    // row 3 after its NaN
  CHECK(std::isfinite(sum1.value[(tiles - 1) * rows + 0]));
  CHECK(sum1.worst[(tiles - 1) * rows + 0] > 0);
}

}  // namespace fc::stage_math

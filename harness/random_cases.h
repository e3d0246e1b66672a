#pragma once
// Seeded random cases for sweeps (the bound tests, the clean sweep of `flashcore-check
// faults`): mixed shapes (S not a multiple of any tile, GQA, head dims from 1 to 256), masks,
// windows, softcaps, ALiBi, finite masking biases, variable lengths, paged KV, distributions, input dtypes,
// and the formats a kernel may store each stage in.
#include <cstdint>

#include "harness/inputs.h"

namespace fc {

struct RandomCase {
  CaseSpec spec;
  std::int64_t tile_width = 64;
  std::int64_t splits = 2;
  DType score_format = DType::f32;  // qk output
  DType p_format = DType::f32;      // softmax output (p or p~)
  DType operand = DType::f32;       // what pv rounds p to before its products
  bool tensor_cores = false;        // declare the matmuls tensor-core ones (a looser bound)
};

// `small` keeps shapes at unit-test size.
RandomCase random_case(std::uint64_t seed, bool small = true);

// Long context: a few query rows (1 to 64) against 4096 to 16384 keys (odd lengths too),
// otherwise drawn as random_case draws.
RandomCase random_long_case(std::uint64_t seed);

}  // namespace fc

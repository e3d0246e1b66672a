#pragma once
// Which cases a run covers: the cartesian product of the shapes, masks, dtypes,
// distributions and seeds asked for, or a default set of small cases that exercises every
// mask kind, both dtypes, ragged lengths and fully masked rows, GQA, windows, softcap, ALiBi,
// varlen, paged KV and finite masking biases, in seconds.
#include <optional>
#include <string>
#include <vector>

#include "harness/inputs.h"

namespace fc {

struct PlanOptions {
  std::vector<std::string> shapes, masks, dtypes, dists;
  std::vector<std::uint64_t> seeds;
  std::optional<double> scale;
};

// Throws fc::Error on a shape, dtype, mask or distribution a case could not run with.
std::vector<CaseSpec> plan_cases(const PlanOptions& options);
std::vector<CaseSpec> default_cases();

}  // namespace fc

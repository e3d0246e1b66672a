#pragma once
// Delta debugging of a failing case: the smallest case on which an implementation still
// diverges the same way (same stage kind, same cause). In order: the one (batch, head) of
// the divergence, the shortest window of query rows around its row, the shortest key range
// (a prefix, then a suffix), the smallest head dim the implementation runs that keeps it.
// The mask is folded into a dense one first, so slicing rows and keys keeps its meaning.
#include <optional>
#include <string>
#include <vector>

#include "harness/trace/judge.h"
#include "reports/progress.h"

namespace fc {

// Rows [row_begin, row_end) and keys [key_begin, key_end) of head (b, h), first `head_dim`
// dims, the mask as a dense tensor, the same scale.
AttentionInputs slice_case(const AttentionInputs& in, std::int64_t b, std::int64_t h, std::int64_t row_begin,
                           std::int64_t row_end, std::int64_t key_begin, std::int64_t key_end, std::int64_t head_dim);

struct Minimized {
  AttentionInputs inputs;
  Judged judged;                    // the implementation on the minimal case
  std::vector<std::string> steps;   // what each accepted reduction did
  int runs = 0;                     // how many times the implementation ran
};

// `failure` is the divergence to keep (the same stage kind and cause); a GPU implementation
// gets each candidate's inputs on the device. `progress` is told the most runs it may take
// and each run.
std::optional<Minimized> minimize(Implementation& impl, const AttentionInputs& inputs, const Divergence& failure,
                                  Progress* progress = nullptr);

}  // namespace fc

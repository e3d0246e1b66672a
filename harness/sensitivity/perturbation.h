#pragma once
// Small, realistic bugs planted into one stage's captured outputs, to measure what the
// harness catches (`flashcore-check sensitivity`). A bug's effect on a stage quantity is
// computed in FP64 and added to what the kernel captured, so the kernel's own rounding stays
// in the planted values:
//  - a bug of what the stage sees (a key dropped or counted twice, the causal diagonal
//    masked, the softmax scale off): the reference chain of the inputs the bug makes, minus
//    the clean chain;
//  - a row normalized by its neighbour's sum: the row's normalized values times l_r / l_{r+1};
//  - one element times (1 + delta).
#include <optional>
#include <string>
#include <vector>

#include "harness/trace/stage_reference.h"
#include "reference/compare.h"

namespace fc {

enum class PerturbationKind : std::uint8_t { drop_key, duplicate_key, diagonal_shift, scale_error, neighbour_sum,
                                             element_scale };

struct Perturbation {
  PerturbationKind kind = PerturbationKind::drop_key;
  std::int64_t key = 0;    // drop_key, duplicate_key: the key (every query row)
  double delta = 0;        // element_scale: the factor is 1 + delta
  // element_scale: the element (col -1 for a row quantity); neighbour_sum: the head and the
  // row normalized by row + 1's sum.
  Index4 element;

  std::string id() const;           // "drop-key", "element-scale"
  std::string description() const;  // "key 37 dropped from every row"
};

const std::vector<PerturbationKind>& perturbation_kinds();
std::string perturbation_id(PerturbationKind kind);

// The head inputs as the bug makes them, for the bugs of what a stage sees; none otherwise.
std::optional<HeadInputs> bugged_inputs(const Perturbation& p, const HeadInputs& in);

// What the kernel would have stored for one head's quantity `key` under the bug: `kernel`
// (its captured value) plus the bug's FP64 effect. `clean` is the head's end-to-end
// reference, `bugged` the reference of the bugged inputs when the bug is one of them. None
// when the bug does not apply to this quantity (a neighbour's sum where nothing is
// normalized, an element of another head).
std::optional<MatrixR> planted(const Perturbation& p, const QuantityKey& key, const StageGraph& graph,
                               const Shape& shape, std::int64_t b, std::int64_t h, const MatrixR& kernel,
                               const QuantityMap& clean, const QuantityMap* bugged);

}  // namespace fc

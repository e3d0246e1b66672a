#pragma once
// What every stage output of an implementation should hold, for one head:
//  - end to end: the reference chain of the graph's algorithm from the exact inputs;
//  - stage-local: the stage's own evaluation function applied to what the kernel itself
//    produced upstream (exact, zero input error), so only the stage's own error remains.
//    An upstream quantity the kernel did not capture is taken from the end-to-end chain,
//    with its bound, or derived (an uncaptured rescale is evaluated from the captured
//    accumulator and maxima).
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "reference/attention.h"
#include "stages/stage.h"

namespace fc {

struct QuantityKey {
  Quantity quantity;
  int split = -1, tile = -1;
  bool operator<(const QuantityKey& o) const;
};

QuantityKey key_of(const Stage& stage, const StageOutput& output);

using QuantityMap = std::map<QuantityKey, Bounded>;

// Every quantity of the graph's algorithm, end to end, evaluated by `ev` (on the host for
// the HeadInputs overload).
QuantityMap end_to_end_reference(const HeadEvaluator& ev, const Shape& shape, const StageGraph& graph);
QuantityMap end_to_end_reference(const HeadInputs& in, const Shape& shape, const StageGraph& graph);

class LocalReference {
 public:
  // `kernel` holds the captured outputs of this head, exact, in their stored formats.
  // `keys`: the keys of the head's sequence (varlen: fewer than Shape's), so that a final
  // stage reads the last tile that exists.
  // The stage functions run on `ev` (the host's or a GPU's evaluator of the head).
  LocalReference(const HeadEvaluator& ev, const Shape& shape, const StageGraph& graph, const QuantityMap& end_to_end,
                 const QuantityMap& kernel, std::int64_t keys);
  Bounded evaluate(const Stage& stage, const StageOutput& output) const;
  // evaluate() of each output, the tiles' online softmax, rescale and P.V each evaluated as
  // one batch (HeadEvaluator's *_each: a GPU evaluates a split's tiles at once).
  using OutputRef = std::pair<const Stage*, const StageOutput*>;
  std::vector<Bounded> evaluate_all(const std::vector<OutputRef>& outputs) const;

 private:
  const SoftmaxResult& softmax(int split) const;
  const OnlineSoftmaxResult& online_softmax(int split, int tile) const;
  const Bounded& input(Quantity q, int split, int tile) const;
  // What each tiled stage function of (split, tile) reads: the kernel's captures where they
  // exist, the end-to-end chain's otherwise, and before the first tile max -inf, sum 0 and
  // a zero accumulator.
  HeadEvaluator::OnlineSoftmaxItem softmax_item(int split, int tile) const;
  HeadEvaluator::RescaleItem rescale_item(int split, int tile) const;
  // The accumulator tile's P.V adds to when it is not evaluated: the kernel's rescale output,
  // or zero before the first tile (null: the rescale is evaluated, rescale_item).
  const Bounded* rescaled_held(int split, int tile) const;
  HeadEvaluator::PvItem pv_item(int split, int tile, const Bounded* acc) const;
  int last_tile(int split) const;

  const HeadEvaluator& ev_;
  const HeadInputs& in_;
  const Shape& shape_;
  const StageGraph& graph_;
  const QuantityMap& e2e_;
  const QuantityMap& kernel_;
  std::int64_t keys_;
  Bounded no_max_, no_sum_, no_acc_;  // before the first tile, where the evaluator works
  // The last softmax and online softmax evaluated: a stage's outputs (p, max, sum) are asked
  // for one after another, and each would evaluate the same function again.
  mutable std::optional<std::pair<int, SoftmaxResult>> softmax_;                        // split
  mutable std::optional<std::pair<std::pair<int, int>, OnlineSoftmaxResult>> online_;  // split, tile
};

}  // namespace fc

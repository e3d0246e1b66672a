#include "support/full_chain.h"

namespace fc::test {

StageGraph full_chain_graph(const Problem& p) {
  StageGraph g;
  g.algorithm.kind = Algorithm::Kind::full;
  g.arithmetic = nominal_arithmetic(p.dtype);
  g.stages = {{StageKind::qk, -1, -1, {{"", Quantity::scores, DType::f32}}},
              {StageKind::softmax, -1, -1, {{"", Quantity::probs, DType::f32}}},
              {StageKind::pv, -1, -1, {{"", Quantity::output, p.dtype}}}};
  return g;
}

}  // namespace fc::test

#pragma once
// The stage graph of a small CPU test implementation that forms attention in full rows: qk
// (fp32 scores), softmax (fp32 probabilities), P.V (the output in the input format).
#include "core/problem.h"
#include "stages/stage.h"

namespace fc::test {

StageGraph full_chain_graph(const Problem& p);

}  // namespace fc::test

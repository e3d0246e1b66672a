#pragma once
// The two stage graphs unfused implementations share, built in one place:
//   full   qk, softmax over whole rows (p, row max, row sum), pv
//   paged  per page of keys: qk[j], softmax[j] (p~, running max, running sum), rescale[j]
//          (pages after the first), pv[j] (accumulating after the first); then normalize
// The fused kernels' graphs are in fused_trace.h.
#include "kernels/implementation.h"

namespace fc {

struct FullGraph {
  DType scores = DType::f32;
  double score_scale = 1.0;   // stored score times this is the score (fp16-scores: the scale)
  DType probs = DType::f32;   // softmax output, and the operand P.V reads
  bool tensor_cores = false;  // the matmuls run on tensor cores
};
StageGraph full_stage_graph(const Problem& problem, const FullGraph& options);

struct PagedGraph {
  std::int64_t page_width = 128;
  DType scores = DType::f32;
  double score_scale = 1.0;
  bool tensor_cores = false;
  bool rescale_first_page = false;     // the first-page-rescale fault
  bool accumulate_first_page = false;  // the beta-first-page fault
  bool lse = false;                    // normalize also writes each row's lse (fp32)
};
// p~ is stored in the input format (the P.V operand), the accumulator in fp32.
StageGraph paged_stage_graph(const Problem& problem, const PagedGraph& options);

// Where page j's stages sit in a paged graph (indices into graph.stages): what a paged
// implementation passes to the tap after each of them.
struct PageStages {
  std::size_t qk = 0, softmax = 0, rescale = 0, pv = 0;
  bool has_rescale = false;
};
std::vector<PageStages> page_stages(const StageGraph& graph);

}  // namespace fc

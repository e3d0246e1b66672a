#include "kernels/common/stage_graphs.h"

namespace fc {

StageGraph full_stage_graph(const Problem& p, const FullGraph& o) {
  StageGraph g;
  g.algorithm.kind = Algorithm::Kind::full;
  g.arithmetic = nominal_arithmetic(p.dtype);
  g.arithmetic.qk.out = o.scores;
  g.arithmetic.softmax.out = o.probs;
  g.arithmetic.pv.operand = o.probs;
  g.arithmetic.qk.tensor_cores = g.arithmetic.pv.tensor_cores = o.tensor_cores;
  g.stages = {
      {StageKind::qk, -1, -1, {{"", Quantity::scores, o.scores, o.score_scale}}},
      {StageKind::softmax, -1, -1,
       {{"", Quantity::probs, o.probs}, {"max", Quantity::row_max, DType::f32}, {"sum", Quantity::row_sum, DType::f32}}},
      {StageKind::pv, -1, -1, {{"", Quantity::output, p.dtype}}},
  };
  return g;
}

StageGraph paged_stage_graph(const Problem& p, const PagedGraph& o) {
  StageGraph g;
  g.algorithm = {Algorithm::Kind::blocked, o.page_width, 0};
  g.arithmetic = nominal_arithmetic(p.dtype);
  g.arithmetic.qk.out = o.scores;
  g.arithmetic.softmax.out = p.dtype;  // p~ is stored as the P.V operand
  g.arithmetic.pv.out = DType::f32;    // the running accumulator
  g.arithmetic.pv.operand = p.dtype;
  g.arithmetic.qk.tensor_cores = g.arithmetic.pv.tensor_cores = o.tensor_cores;
  const int pages = static_cast<int>(tile_count(0, p.shape.kv_len, o.page_width));
  for (int j = 0; j < pages; ++j) {
    g.stages.push_back({StageKind::qk, -1, j, {{"", Quantity::scores, o.scores, o.score_scale}}});
    g.stages.push_back({StageKind::softmax, -1, j,
                        {{"", Quantity::p_tilde, p.dtype},
                         {"max", Quantity::row_max, DType::f32},
                         {"sum", Quantity::row_sum, DType::f32}}});
    if (j > 0 || o.rescale_first_page) {
      g.stages.push_back({StageKind::rescale, -1, j, {{"", Quantity::rescaled_acc, DType::f32}}, true});
    }
    g.stages.push_back({StageKind::pv, -1, j, {{"", Quantity::acc, DType::f32}}, j > 0 || o.accumulate_first_page});
  }
  g.stages.push_back({StageKind::normalize, -1, -1, {{"", Quantity::output, p.dtype}}});
  if (o.lse) g.stages.back().outputs.push_back({"lse", Quantity::lse, DType::f32});
  return g;
}

std::vector<PageStages> page_stages(const StageGraph& graph) {
  std::vector<PageStages> pages;
  for (std::size_t i = 0; i < graph.stages.size(); ++i) {
    const Stage& st = graph.stages[i];
    if (st.tile < 0) continue;
    if (static_cast<std::size_t>(st.tile) >= pages.size()) pages.resize(static_cast<std::size_t>(st.tile) + 1);
    PageStages& page = pages[static_cast<std::size_t>(st.tile)];
    switch (st.kind) {
      case StageKind::qk: page.qk = i; break;
      case StageKind::softmax: page.softmax = i; break;
      case StageKind::pv: page.pv = i; break;
      case StageKind::rescale:
        page.rescale = i;
        page.has_rescale = true;
        break;
      default: break;
    }
  }
  return pages;
}

}  // namespace fc

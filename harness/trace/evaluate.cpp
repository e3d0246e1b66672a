#include "harness/trace/evaluate.h"

#include <string>

#include "core/parallel.h"
#include "harness/trace/stage_reference.h"

namespace fc {
namespace {

OutputResult describe(const Shape& shape, const StageGraph& graph, const Captured& c) {
  const Stage& stage = graph.stages[c.stage];
  const StageOutput& out = stage.outputs[c.output];
  OutputResult r;
  r.name = stage.output_name(c.output);
  r.stage_name = stage.name();
  r.kind = stage.kind;
  r.split = stage.split;
  r.tile = stage.tile;
  r.quantity = out.quantity;
  r.dtype = out.dtype;
  r.value_scale = out.value_scale;
  r.dims = output_dims(shape, graph.algorithm, stage, out);
  const bool key_indexed = out.quantity == Quantity::scores || out.quantity == Quantity::p_tilde;
  r.col_offset = key_indexed ? stage_columns(shape, graph.algorithm, stage).begin : 0;
  r.present = c.present;
  r.capture_problem = c.problem;
  r.flags = c.flags;
  return r;
}

struct HeadMetrics {
  Metrics end_to_end, local;
};

Bounded top_left(const Bounded& b, const Extent& e) {
  Bounded out;
  out.value = b.value.topLeftCorner(e.rows, e.cols);
  out.bound = b.bound.topLeftCorner(e.rows, e.cols);
  out.format = b.format;
  return out;
}

// The kernel's values where they exist, the end-to-end reference's elsewhere: what the
// stage-local references read, so that nothing past a sequence's lengths (never written by
// a kernel that reads the packed layout) reaches a row that exists.
MatrixR within_extent(const MatrixR& kernel, const MatrixR& reference, const Extent& e) {
  if (e.rows == kernel.rows() && e.cols == kernel.cols()) return kernel;
  MatrixR m = reference;
  m.topLeftCorner(e.rows, e.cols) = kernel.topLeftCorner(e.rows, e.cols);
  return m;
}

}  // namespace

std::vector<OutputResult> evaluate_outputs(const AttentionInputs& inputs, const TraceRun& run,
                                           std::vector<OutputReferences>* references) {
  const Shape& shape = inputs.problem.shape;
  const StageGraph& graph = run.graph;
  std::vector<OutputResult> results;
  std::vector<std::size_t> comparable;  // indices into run.captured with a host tensor
  for (std::size_t i = 0; i < run.captured.size(); ++i) {
    results.push_back(describe(shape, graph, run.captured[i]));
    const Captured& c = run.captured[i];
    if (c.present && c.problem.empty() && !c.tensor.empty()) comparable.push_back(i);
  }
  if (references) references->assign(run.captured.size(), {});
  if (comparable.empty()) return results;
  if (references) {
    for (std::size_t i : comparable) {
      OutputReferences& r = (*references)[i];
      for (HostTensor* t : {&r.end_to_end, &r.end_to_end_bound, &r.local, &r.local_bound}) {
        *t = HostTensor(DType::f64, results[i].dims);
      }
    }
  }

  const std::int64_t heads = shape.batch * shape.heads;
  std::vector<std::vector<HeadMetrics>> per_head(static_cast<std::size_t>(heads));
  parallel_for(heads, [&](std::int64_t bh) {
    const std::int64_t b = bh / shape.heads, h = bh % shape.heads;
    const HeadInputs in = head_inputs(inputs, b, h);
    const QuantityMap e2e = end_to_end_reference(in, shape, graph);
    QuantityMap kernel;
    for (std::size_t i : comparable) {
      const Captured& c = run.captured[i];
      const Stage& stage = graph.stages[c.stage];
      const StageOutput& out = stage.outputs[c.output];
      const Extent extent = existing_extent(inputs.problem, graph.algorithm, stage, out, b);
      const MatrixR values = head_matrix(c.tensor, b, h) * out.value_scale;
      kernel[key_of(stage, out)] =
          Bounded::exact(within_extent(values, e2e.at(key_of(stage, out)).value, extent), out.dtype);
    }
    const LocalReference local(in, shape, graph, e2e, kernel, inputs.problem.kv_len_of(b));
    std::vector<HeadMetrics>& mine = per_head[static_cast<std::size_t>(bh)];
    for (std::size_t i : comparable) {
      const Captured& c = run.captured[i];
      const Stage& stage = graph.stages[c.stage];
      const StageOutput& out = stage.outputs[c.output];
      const OutputResult& r = results[i];
      const HeadSpot spot{b, h, r.col_offset, is_row_quantity(out.quantity)};
      const MatrixR& k = kernel.at(key_of(stage, out)).value;
      const Bounded& end_to_end = e2e.at(key_of(stage, out));
      const Bounded stage_local = local.evaluate(stage, out);
      // Only what exists is compared (varlen: rows and keys past a sequence's lengths do not).
      const Extent e = existing_extent(inputs.problem, graph.algorithm, stage, out, b);
      const MatrixR kept = k.topLeftCorner(e.rows, e.cols);
      mine.push_back({compare_head(spot, kept, top_left(end_to_end, e), out.dtype),
                      compare_head(spot, kept, top_left(stage_local, e), out.dtype)});
      if (references) {  // each head writes its own slice: no two threads share elements
        OutputReferences& refs = (*references)[i];
        set_head(refs.end_to_end, b, h, end_to_end.value);
        set_head(refs.end_to_end_bound, b, h, end_to_end.bound);
        set_head(refs.local, b, h, stage_local.value);
        set_head(refs.local_bound, b, h, stage_local.bound);
      }
    }
  });
  for (std::size_t n = 0; n < comparable.size(); ++n) {
    OutputResult& r = results[comparable[n]];
    r.compared = true;
    for (std::int64_t bh = 0; bh < heads; ++bh) {
      const HeadMetrics& m = per_head[static_cast<std::size_t>(bh)][n];
      if (bh == 0) {
        r.end_to_end = m.end_to_end;
        r.local = m.local;
      } else {
        merge_after(r.end_to_end, m.end_to_end);
        merge_after(r.local, m.local);
      }
    }
  }
  return results;
}

}  // namespace fc

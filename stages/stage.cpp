#include "stages/stage.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace fc {

const char* stage_kind_name(StageKind kind) {
  switch (kind) {
    case StageKind::qk: return "qk";
    case StageKind::softmax: return "softmax";
    case StageKind::rescale: return "rescale";
    case StageKind::pv: return "pv";
    case StageKind::normalize: return "normalize";
    case StageKind::lse: return "lse";
    case StageKind::combine: return "combine";
  }
  return "?";
}

const char* quantity_name(Quantity q) {
  switch (q) {
    case Quantity::scores: return "scores";
    case Quantity::probs: return "probs";
    case Quantity::p_tilde: return "p_tilde";
    case Quantity::row_max: return "row_max";
    case Quantity::row_sum: return "row_sum";
    case Quantity::rescaled_acc: return "rescaled_acc";
    case Quantity::acc: return "acc";
    case Quantity::output: return "output";
    case Quantity::partial_output: return "partial_output";
    case Quantity::partial_lse: return "partial_lse";
    case Quantity::lse: return "lse";
  }
  return "?";
}

bool is_row_quantity(Quantity q) {
  return q == Quantity::row_max || q == Quantity::row_sum || q == Quantity::partial_lse || q == Quantity::lse;
}

bool is_result(Quantity q) {
  return q == Quantity::output || q == Quantity::lse || q == Quantity::partial_output || q == Quantity::partial_lse;
}

std::string Stage::name() const {
  std::string s = stage_kind_name(kind);
  if (split >= 0 && tile >= 0) return s + "[" + std::to_string(split) + "." + std::to_string(tile) + "]";
  if (split >= 0) return s + "[" + std::to_string(split) + "]";
  if (tile >= 0) return s + "[" + std::to_string(tile) + "]";
  return s;
}

std::string Stage::output_name(std::size_t i) const {
  const std::string& n = outputs.at(i).name;
  return n.empty() ? name() : name() + "." + n;
}

std::string Algorithm::describe() const {
  switch (kind) {
    case Kind::full: return "full rows";
    case Kind::blocked: return "online softmax, tiles of " + std::to_string(tile_width) + " keys";
    case Kind::split:
      return "split-KV, " + std::to_string(splits) + " splits, tiles of " + std::to_string(tile_width) + " keys";
  }
  return "?";
}

std::size_t StageGraph::output_count() const {
  std::size_t n = 0;
  for (const Stage& s : stages) n += s.outputs.size();
  return n;
}

const Arithmetic& arithmetic_of(const ChainArithmetic& chain, StageKind kind) {
  switch (kind) {
    case StageKind::qk: return chain.qk;
    case StageKind::softmax: return chain.softmax;
    case StageKind::rescale: return chain.rescale;
    case StageKind::pv: return chain.pv;
    case StageKind::normalize: return chain.normalize;
    case StageKind::lse: return chain.lse;
    case StageKind::combine: return chain.combine;
  }
  return chain.qk;
}

Arithmetic& arithmetic_of(ChainArithmetic& chain, StageKind kind) {
  return const_cast<Arithmetic&>(arithmetic_of(static_cast<const ChainArithmetic&>(chain), kind));
}

std::int64_t tile_count(std::int64_t begin, std::int64_t end, std::int64_t tile_width) {
  return end <= begin ? 0 : (end - begin + tile_width - 1) / tile_width;
}

KeyRange tile_columns(const Shape& shape, const Algorithm& algorithm, int split, int tile) {
  KeyRange range{0, shape.kv_len};
  if (algorithm.kind == Algorithm::Kind::split && split >= 0) {
    range = split_range(shape.kv_len, algorithm.splits, algorithm.tile_width, split);
  }
  if (tile >= 0) {
    const std::int64_t begin = range.begin + tile * algorithm.tile_width;
    if (begin >= range.end) {
      throw Error("tile " + std::to_string(tile) + " of split " + std::to_string(split) + " lies past the last key");
    }
    range = {begin, std::min(range.end, begin + algorithm.tile_width)};
  }
  return range;
}

void check_stage_placement(const Shape& shape, const Algorithm& algorithm, const Stage& stage) {
  const int split = stage.split, page = stage.tile;
  if (split != -1 && (algorithm.kind != Algorithm::Kind::split || split < 0 || split >= algorithm.splits)) {
    throw Error("split " + std::to_string(split) + " is not one of the graph's (" +
                (algorithm.kind == Algorithm::Kind::split ? std::to_string(algorithm.splits) + " splits" : "none") + ")");
  }
  if (page != -1 && (algorithm.kind == Algorithm::Kind::full || page < 0)) {
    throw Error("page " + std::to_string(page) + " in a graph without pages");
  }
  if (page >= 0) tile_columns(shape, algorithm, split, page);  // past the last key: throws
  for (const StageOutput& o : stage.outputs) {
    if (!(o.value_scale > 0) || !std::isfinite(o.value_scale)) {
      throw Error("value_scale " + std::to_string(o.value_scale) + " of " + stage.output_name(0) + ": must be finite and positive");
    }
  }
}

namespace {

// Sums f(output, its element count) over every output of every stage.
template <class F>
double sum_over_outputs(const Shape& shape, const StageGraph& graph, F f) {
  double total = 0;
  for (const Stage& stage : graph.stages) {
    for (const StageOutput& output : stage.outputs) {
      double n = 1;
      for (const std::int64_t d : output_dims(shape, graph.algorithm, stage, output)) n *= static_cast<double>(d);
      total += f(output, n);
    }
  }
  return total;
}

}  // namespace

double graph_output_elements(const Shape& shape, const StageGraph& graph) {
  return sum_over_outputs(shape, graph, [](const StageOutput&, double n) { return n; });
}

double graph_output_bytes(const Shape& shape, const StageGraph& graph) {
  return sum_over_outputs(shape, graph,
                          [](const StageOutput& o, double n) { return n * static_cast<double>(dtype_size(o.dtype)); });
}

Dims output_dims(const Shape& shape, const Algorithm& algorithm, const Stage& stage, const StageOutput& output) {
  const Dims rows{shape.batch, shape.heads, shape.q_len};
  switch (output.quantity) {
    case Quantity::scores:
    case Quantity::p_tilde: {
      const KeyRange cols = stage_columns(shape, algorithm, stage);
      return {shape.batch, shape.heads, shape.q_len, cols.end - cols.begin};
    }
    case Quantity::probs: return {shape.batch, shape.heads, shape.q_len, shape.kv_len};
    case Quantity::row_max:
    case Quantity::row_sum:
    case Quantity::partial_lse:
    case Quantity::lse: return rows;
    case Quantity::rescaled_acc:
    case Quantity::acc:
    case Quantity::output:
    case Quantity::partial_output: return {shape.batch, shape.heads, shape.q_len, shape.head_dim};
  }
  return rows;
}

Extent existing_extent(const Problem& problem, const Algorithm& algorithm, const Stage& stage, const StageOutput& output,
                       std::int64_t b) {
  const Dims dims = output_dims(problem.shape, algorithm, stage, output);
  Extent e{dims[2], dims.size() == 4 ? dims[3] : 1};
  if (!problem.layout.varlen()) return e;
  const std::int64_t keys = problem.kv_len_of(b);
  e.rows = std::min(e.rows, problem.q_len_of(b));
  if (stage.tile >= 0 && stage_columns(problem.shape, algorithm, stage).begin >= keys) return {0, 0};
  const bool key_indexed = output.quantity == Quantity::scores || output.quantity == Quantity::probs ||
                           output.quantity == Quantity::p_tilde;
  if (key_indexed) {
    const std::int64_t first = output.quantity == Quantity::probs ? 0 : stage_columns(problem.shape, algorithm, stage).begin;
    e.cols = std::max<std::int64_t>(0, std::min(e.cols, keys - first));
  }
  if (e.rows == 0 || e.cols == 0) return {0, 0};
  return e;
}

Dims windowed_dims(Dims dims, const RowWindow& window) {
  if (dims.size() >= 3) dims[2] = window.held(dims[2]);
  return dims;
}

}  // namespace fc

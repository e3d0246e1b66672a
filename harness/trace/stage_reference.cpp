#include "harness/trace/stage_reference.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <limits>
#include <tuple>

#include "core/error.h"

namespace fc {
namespace {

void add_tiles(QuantityMap& map, const BlockedReference& blocked, int split) {
  for (std::size_t j = 0; j < blocked.tiles.size(); ++j) {
    const TileReference& t = blocked.tiles[j];
    const int tile = static_cast<int>(j);
    map[{Quantity::scores, split, tile}] = t.scores;
    map[{Quantity::p_tilde, split, tile}] = t.softmax.p_tilde;
    map[{Quantity::row_max, split, tile}] = t.softmax.max;
    map[{Quantity::row_sum, split, tile}] = t.softmax.sum;
    map[{Quantity::rescaled_acc, split, tile}] = t.rescaled;
    map[{Quantity::acc, split, tile}] = t.acc;
  }
}

}  // namespace

bool QuantityKey::operator<(const QuantityKey& o) const {
  return std::tie(quantity, split, tile) < std::tie(o.quantity, o.split, o.tile);
}

QuantityKey key_of(const Stage& stage, const StageOutput& output) { return {output.quantity, stage.split, stage.tile}; }

QuantityMap end_to_end_reference(const HeadInputs& in, const Shape& shape, const StageGraph& graph) {
  return end_to_end_reference(*host_evaluator(in), shape, graph);
}

QuantityMap end_to_end_reference(const HeadEvaluator& ev, const Shape& shape, const StageGraph& graph) {
  QuantityMap map;
  const ChainArithmetic& a = graph.arithmetic;
  switch (graph.algorithm.kind) {
    case Algorithm::Kind::full: {
      const FullReference f = full_reference(ev, a);
      map[{Quantity::scores}] = f.scores;
      map[{Quantity::probs}] = f.softmax.p;
      map[{Quantity::row_max}] = f.softmax.max;
      map[{Quantity::row_sum}] = f.softmax.sum;
      map[{Quantity::output}] = f.out;
      map[{Quantity::lse}] = f.lse;
      break;
    }
    case Algorithm::Kind::blocked: {
      const BlockedReference b = blocked_reference(ev, 0, shape.kv_len, graph.algorithm.tile_width, a);
      add_tiles(map, b, -1);
      map[{Quantity::output}] = b.out;
      map[{Quantity::lse}] = b.lse;
      break;
    }
    case Algorithm::Kind::split: {
      const SplitReference s = split_reference(ev, graph.algorithm.splits, graph.algorithm.tile_width, a);
      std::vector<Bounded> lses;
      for (std::size_t t = 0; t < s.splits.size(); ++t) {
        const int split = static_cast<int>(t);
        add_tiles(map, s.splits[t], split);
        map[{Quantity::partial_output, split}] = s.splits[t].out;
        map[{Quantity::partial_lse, split}] = s.splits[t].lse;
        lses.push_back(s.splits[t].lse);
      }
      map[{Quantity::output}] = s.out;
      map[{Quantity::lse}] = s.lse;
      break;
    }
  }
  return map;
}

LocalReference::LocalReference(const HeadEvaluator& ev, const Shape& shape, const StageGraph& graph,
                               const QuantityMap& end_to_end, const QuantityMap& kernel, std::int64_t keys)
    : ev_(ev),
      in_(ev.inputs()),
      shape_(shape),
      graph_(graph),
      e2e_(end_to_end),
      kernel_(kernel),
      keys_(keys),
      no_max_(ev.resident(Bounded::exact(MatrixR::Constant(in_.q.rows(), 1, -std::numeric_limits<double>::infinity()),
                                         DType::f32))),
      no_sum_(ev.resident(Bounded::exact(MatrixR::Zero(in_.q.rows(), 1), DType::f32))),
      no_acc_(ev.resident(Bounded::exact(MatrixR::Zero(in_.q.rows(), shape.head_dim), DType::f32))) {}

const Bounded& LocalReference::input(Quantity q, int split, int tile) const {
  const QuantityKey key{q, split, tile};
  if (auto it = kernel_.find(key); it != kernel_.end()) return it->second;
  if (auto it = e2e_.find(key); it != e2e_.end()) return it->second;
  throw Error(std::string("no reference for ") + quantity_name(q) + " split " + std::to_string(split) + " tile " +
              std::to_string(tile));
}

int LocalReference::last_tile(int split) const {
  const KeyRange range = tile_columns(shape_, graph_.algorithm, split, -1);
  return static_cast<int>(tile_count(range.begin, std::min(range.end, keys_), graph_.algorithm.tile_width)) - 1;
}

HeadEvaluator::OnlineSoftmaxItem LocalReference::softmax_item(int split, int tile) const {
  const bool first = tile == 0;
  return {&input(Quantity::scores, split, tile), first ? &no_max_ : &input(Quantity::row_max, split, tile - 1),
          first ? &no_sum_ : &input(Quantity::row_sum, split, tile - 1)};
}

HeadEvaluator::RescaleItem LocalReference::rescale_item(int split, int tile) const {
  const bool first = tile == 0;
  return {first ? &no_acc_ : &input(Quantity::acc, split, tile - 1),
          first ? &no_max_ : &input(Quantity::row_max, split, tile - 1), &input(Quantity::row_max, split, tile)};
}

const Bounded* LocalReference::rescaled_held(int split, int tile) const {
  if (auto it = kernel_.find({Quantity::rescaled_acc, split, tile}); it != kernel_.end()) return &it->second;
  return tile == 0 ? &no_acc_ : nullptr;
}

HeadEvaluator::PvItem LocalReference::pv_item(int split, int tile, const Bounded* acc) const {
  const KeyRange cols = tile_columns(shape_, graph_.algorithm, split, tile);
  return {&input(Quantity::p_tilde, split, tile), cols.begin, cols.end, acc};
}

const SoftmaxResult& LocalReference::softmax(int split) const {
  if (!softmax_ || softmax_->first != split) {
    softmax_.reset();  // one held at a time
    softmax_.emplace(split, ev_.softmax(input(Quantity::scores, split, -1), graph_.arithmetic.softmax));
  }
  return softmax_->second;
}

const OnlineSoftmaxResult& LocalReference::online_softmax(int split, int tile) const {
  const std::pair<int, int> at{split, tile};
  if (!online_ || online_->first != at) {
    online_.reset();
    online_.emplace(at, ev_.online_softmax_each({softmax_item(split, tile)}, graph_.arithmetic.softmax)[0]);
  }
  return online_->second;
}

std::vector<Bounded> LocalReference::evaluate_all(const std::vector<OutputRef>& outputs) const {
  const ChainArithmetic& a = graph_.arithmetic;
  using Tile = std::pair<int, int>;  // split, tile
  const auto tile_of = [](const OutputRef& o) { return Tile{o.first->split, o.first->tile}; };
  const auto tiled = [](const OutputRef& o, std::initializer_list<Quantity> qs) {
    if (o.first->tile < 0) return false;
    for (Quantity q : qs) {
      if (o.second->quantity == q) return true;
    }
    return false;
  };
  // Tiles in the order first asked for (a split's tiles ascending, as graphs list them).
  struct Tiles {
    std::vector<Tile> order;
    std::map<Tile, std::size_t> index;
    std::size_t at(Tile t) const { return index.at(t); }
  };
  Tiles softmax_tiles, rescale_tiles, acc_tiles;
  const auto add = [](Tiles& v, Tile t) {
    if (v.index.emplace(t, v.order.size()).second) v.order.push_back(t);
  };
  for (const OutputRef& o : outputs) {
    if (tiled(o, {Quantity::p_tilde, Quantity::row_max, Quantity::row_sum})) add(softmax_tiles, tile_of(o));
    if (tiled(o, {Quantity::rescaled_acc})) add(rescale_tiles, tile_of(o));
    if (tiled(o, {Quantity::acc})) add(acc_tiles, tile_of(o));
  }
  std::vector<HeadEvaluator::OnlineSoftmaxItem> softmax_items;
  for (const Tile& t : softmax_tiles.order) softmax_items.push_back(softmax_item(t.first, t.second));
  const std::vector<OnlineSoftmaxResult> softmaxes = ev_.online_softmax_each(softmax_items, a.softmax);

  // The rescale stages asked for, and those the acc stages need evaluated (rescaled_held).
  Tiles rescaled_needed = rescale_tiles;
  for (const Tile& t : acc_tiles.order) {
    if (!rescaled_held(t.first, t.second)) add(rescaled_needed, t);
  }
  std::vector<HeadEvaluator::RescaleItem> rescale_items;
  for (const Tile& t : rescaled_needed.order) rescale_items.push_back(rescale_item(t.first, t.second));
  const std::vector<Bounded> rescaled = ev_.rescale_each(rescale_items, a.rescale);
  const auto rescaled_of = [&](Tile t) -> const Bounded& { return rescaled[rescaled_needed.at(t)]; };

  std::vector<HeadEvaluator::PvItem> pv_items;
  for (const Tile& t : acc_tiles.order) {
    const Bounded* held = rescaled_held(t.first, t.second);
    pv_items.push_back(pv_item(t.first, t.second, held ? held : &rescaled_of(t)));
  }
  const std::vector<Bounded> accs = ev_.pv_each(pv_items, a.pv);

  std::vector<Bounded> out;
  for (const OutputRef& o : outputs) {
    const Tile t = tile_of(o);
    if (tiled(o, {Quantity::p_tilde, Quantity::row_max, Quantity::row_sum})) {
      const OnlineSoftmaxResult& r = softmaxes[softmax_tiles.at(t)];
      out.push_back(o.second->quantity == Quantity::p_tilde ? r.p_tilde
                    : o.second->quantity == Quantity::row_max ? r.max
                                                              : r.sum);
    } else if (tiled(o, {Quantity::rescaled_acc})) {
      out.push_back(rescaled_of(t));
    } else if (tiled(o, {Quantity::acc})) {
      out.push_back(accs[acc_tiles.at(t)]);
    } else {
      out.push_back(evaluate(*o.first, *o.second));
    }
  }
  return out;
}

Bounded LocalReference::evaluate(const Stage& stage, const StageOutput& output) const {
  const ChainArithmetic& a = graph_.arithmetic;
  const int split = stage.split, tile = stage.tile;
  switch (output.quantity) {
    case Quantity::scores:
      return e2e_.at({Quantity::scores, split, tile});
    case Quantity::probs:
      return softmax(split).p;
    case Quantity::p_tilde:
    case Quantity::row_max:
    case Quantity::row_sum: {
      if (tile < 0) {  // whole-row softmax
        const SoftmaxResult& r = softmax(split);
        return output.quantity == Quantity::row_max ? r.max : r.sum;
      }
      const OnlineSoftmaxResult& r = online_softmax(split, tile);
      if (output.quantity == Quantity::p_tilde) return r.p_tilde;
      return output.quantity == Quantity::row_max ? r.max : r.sum;
    }
    case Quantity::rescaled_acc:
      return ev_.rescale_each({rescale_item(split, tile)}, a.rescale)[0];
    case Quantity::acc: {
      const Bounded* held = rescaled_held(split, tile);
      const Bounded rescaled = held ? Bounded() : ev_.rescale_each({rescale_item(split, tile)}, a.rescale)[0];
      return ev_.pv_each({pv_item(split, tile, held ? held : &rescaled)}, a.pv)[0];
    }
    case Quantity::partial_output:
    case Quantity::partial_lse: {
      const int last = last_tile(split);
      if (last < 0) return e2e_.at({output.quantity, split, -1});  // an empty split
      const Bounded sum = input(Quantity::row_sum, split, last);
      if (output.quantity == Quantity::partial_lse) return ev_.lse(input(Quantity::row_max, split, last), sum, a.lse);
      return ev_.normalize(input(Quantity::acc, split, last), sum, a.normalize);
    }
    case Quantity::lse: {
      switch (graph_.algorithm.kind) {
        case Algorithm::Kind::full: return ev_.lse(input(Quantity::row_max, -1, -1), input(Quantity::row_sum, -1, -1), a.lse);
        case Algorithm::Kind::blocked: {
          const int last = last_tile(-1);
          if (last < 0) return e2e_.at({Quantity::lse});  // a sequence with no key
          return ev_.lse(input(Quantity::row_max, -1, last), input(Quantity::row_sum, -1, last), a.lse);
        }
        case Algorithm::Kind::split: {
          std::vector<Bounded> lses;
          for (int t = 0; t < graph_.algorithm.splits; ++t) lses.push_back(input(Quantity::partial_lse, t, -1));
          return ev_.combine_lse(lses, a.combine);
        }
      }
      break;
    }
    case Quantity::output: {
      switch (graph_.algorithm.kind) {
        case Algorithm::Kind::full:
          return ev_.pv(input(Quantity::probs, -1, -1), 0, in_.v().rows(), nullptr, a.pv);
        case Algorithm::Kind::blocked: {
          const int last = last_tile(-1);
          if (last < 0) return e2e_.at({Quantity::output});  // a sequence with no key
          return ev_.normalize(input(Quantity::acc, -1, last), input(Quantity::row_sum, -1, last), a.normalize);
        }
        case Algorithm::Kind::split: {
          std::vector<Bounded> outs, lses;
          for (int t = 0; t < graph_.algorithm.splits; ++t) {
            outs.push_back(input(Quantity::partial_output, t, -1));
            lses.push_back(input(Quantity::partial_lse, t, -1));
          }
          return ev_.combine(outs, lses, a.combine);
        }
      }
    }
  }
  throw Error("no stage-local reference for " + stage.output_name(0));
}

}  // namespace fc

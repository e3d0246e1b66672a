#include "harness/sensitivity/perturbation.h"

#include <cmath>
#include <limits>

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The scale error a wrong constant or a reduced-precision scale makes: 2^-8 relative.
const double kScaleError = std::ldexp(1.0, -8);

// The row sum that normalizes `key`'s rows, if the quantity is a normalized one.
std::optional<MatrixR> normalizer(const QuantityKey& key, const StageGraph& graph, const Shape& shape,
                                  const QuantityMap& clean) {
  auto last_tile_sum = [&](int split) -> std::optional<MatrixR> {
    const KeyRange range = tile_columns(shape, graph.algorithm, split, -1);
    const int last = static_cast<int>(tile_count(range.begin, range.end, graph.algorithm.tile_width)) - 1;
    if (last < 0) return std::nullopt;
    return clean.at({Quantity::row_sum, split, last}).value;
  };
  switch (key.quantity) {
    case Quantity::probs: return clean.at({Quantity::row_sum}).value;
    case Quantity::partial_output: return last_tile_sum(key.split);
    case Quantity::output:
      if (graph.algorithm.kind == Algorithm::Kind::full) return clean.at({Quantity::row_sum}).value;
      if (graph.algorithm.kind == Algorithm::Kind::blocked) return last_tile_sum(-1);
      return std::nullopt;  // a combine weighs normalized partials: no row sum of its own
    default: return std::nullopt;
  }
}

}  // namespace

const std::vector<PerturbationKind>& perturbation_kinds() {
  static const std::vector<PerturbationKind> kinds{PerturbationKind::drop_key,     PerturbationKind::duplicate_key,
                                                   PerturbationKind::diagonal_shift, PerturbationKind::scale_error,
                                                   PerturbationKind::neighbour_sum, PerturbationKind::element_scale};
  return kinds;
}

std::string perturbation_id(PerturbationKind kind) {
  switch (kind) {
    case PerturbationKind::drop_key: return "drop-key";
    case PerturbationKind::duplicate_key: return "duplicate-key";
    case PerturbationKind::diagonal_shift: return "diagonal-shift";
    case PerturbationKind::scale_error: return "scale-error";
    case PerturbationKind::neighbour_sum: return "neighbour-sum";
    case PerturbationKind::element_scale: return "element-scale";
  }
  return "?";
}

std::string Perturbation::id() const { return perturbation_id(kind); }

std::string Perturbation::description() const {
  switch (kind) {
    case PerturbationKind::drop_key: return "key " + std::to_string(key) + " dropped from every row";
    case PerturbationKind::duplicate_key: return "key " + std::to_string(key) + " counted twice in every row";
    case PerturbationKind::diagonal_shift: return "the causal diagonal masked (the mask off by one)";
    case PerturbationKind::scale_error: return "the softmax scale times (1 + 2^-8)";
    case PerturbationKind::neighbour_sum:
      return "row " + std::to_string(element.row) + " normalized by row " + std::to_string(element.row + 1) + "'s sum";
    case PerturbationKind::element_scale: return "one element times (1 + " + std::to_string(delta) + ")";
  }
  return "?";
}

std::optional<HeadInputs> bugged_inputs(const Perturbation& p, const HeadInputs& in) {
  HeadInputs out = in;
  const Eigen::Index rows = in.bias.rows(), keys = in.bias.cols();
  switch (p.kind) {
    case PerturbationKind::drop_key: out.bias.col(p.key).setConstant(-kInf); return out;
    case PerturbationKind::duplicate_key:
      // exp(s + ln 2) = 2 exp(s): the key weighs twice, as if summed twice.
      out.bias.col(p.key).array() += std::log(2.0);
      return out;
    case PerturbationKind::diagonal_shift:
      for (Eigen::Index i = 0; i < rows; ++i) {
        const Eigen::Index j = i + keys - rows;  // the bottom-right diagonal
        if (j >= 0 && j < keys) out.bias(i, j) = -kInf;
      }
      return out;
    case PerturbationKind::scale_error: out.scale *= 1 + kScaleError; return out;
    default: return std::nullopt;
  }
}

std::optional<MatrixR> planted(const Perturbation& p, const QuantityKey& key, const StageGraph& graph,
                               const Shape& shape, std::int64_t b, std::int64_t h, const MatrixR& kernel,
                               const QuantityMap& clean, const QuantityMap* bugged) {
  MatrixR out = kernel;
  switch (p.kind) {
    case PerturbationKind::neighbour_sum: {
      if (b != p.element.b || h != p.element.h) return std::nullopt;
      const std::optional<MatrixR> l = normalizer(key, graph, shape, clean);
      const Eigen::Index r = p.element.row;
      if (!l || r + 1 >= l->rows() || (*l)(r, 0) <= 0 || (*l)(r + 1, 0) <= 0) return std::nullopt;
      out.row(r) *= (*l)(r, 0) / (*l)(r + 1, 0);
      return out;
    }
    case PerturbationKind::element_scale: {
      if (b != p.element.b || h != p.element.h) return std::nullopt;
      out(p.element.row, std::max<std::int64_t>(p.element.col, 0)) *= 1 + p.delta;
      return out;
    }
    default: break;
  }
  if (!bugged) return std::nullopt;
  const MatrixR& c = clean.at(key).value;
  const MatrixR& g = bugged->at(key).value;
  for (Eigen::Index i = 0; i < out.size(); ++i) {
    const double was = c.data()[i], now = g.data()[i];
    if (was == now) continue;
    if (now == -kInf || was == -kInf) {
      out.data()[i] = now;  // masked by the bug, or unmasked: the bugged chain's value itself
    } else {
      out.data()[i] += now - was;
    }
  }
  return out;
}

}  // namespace fc

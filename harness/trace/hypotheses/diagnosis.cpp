#include "harness/trace/hypotheses/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness/trace/row_sample.h"
#include "reference/attention.h"
#include "reference/compare.h"

namespace fc {

bool Diagnosis::key_indexed() const {
  return result.quantity == Quantity::scores || result.quantity == Quantity::probs ||
         result.quantity == Quantity::p_tilde;
}

bool Diagnosis::judged(std::int64_t b_, std::int64_t h_, std::int64_t row) const {
  if (!sample || sample->all) return true;
  const std::vector<std::int64_t>& rows = sample->per_head[static_cast<std::size_t>(b_ * inputs.problem.shape.heads + h_)];
  return std::binary_search(rows.begin(), rows.end(), row);
}

std::vector<const BadElement*> Diagnosis::probes(std::size_t count) const {
  std::vector<const BadElement*> out;
  std::vector<std::int64_t> rows;
  for (const BadElement& e : bad) {  // the first bad element of each bad row, in order
    if (rows.empty() || rows.back() != e.row) {
      rows.push_back(e.row);
      out.push_back(&e);
    }
  }
  if (out.size() <= count) return out;
  std::vector<const BadElement*> spread;
  for (std::size_t k = 0; k < count; ++k) spread.push_back(out[k * (out.size() - 1) / (count - 1)]);
  return spread;
}

bool Diagnosis::explains(const BadElement& e, double predicted) const {
  const double k = e.kernel;
  if (!std::isfinite(predicted) || !std::isfinite(k)) return predicted == k;
  const double tolerance = 2 * e.bound + 4 * unit_roundoff(result.dtype) * std::fabs(predicted) + 1e-300;
  return std::fabs(k - predicted) <= tolerance;
}

Diagnosis make_diagnosis(const AttentionInputs& inputs, const TraceRun& run, const std::vector<OutputResult>& outputs,
                         const std::vector<OutputReferences>& references, std::size_t index, const Index4& at,
                         bool stage_local, const RowSample* rows) {
  const OutputResult& r = outputs[index];
  Diagnosis d(inputs, run, r);
  d.b = at.b;
  d.h = at.h;
  d.stage_local = stage_local;
  d.col_offset = r.col_offset;
  d.sample = rows;
  // The mask, read where a bias is needed: a whole head's bias matrix is S x S doubles (34 GB
  // at 64k keys).
  d.head = head_inputs(inputs, d.b, d.h, BiasForm::mask);
  const HostTensor& kernel = run.captured[index].tensor;
  if (kernel.empty() || index >= references.size() || references[index].end_to_end.empty()) return d;
  const OutputReferences& refs = references[index];
  const bool tight = (stage_local ? r.local : r.end_to_end).judged_by == BoundChoice::tight;
  const HostTensor& reference = stage_local ? refs.local : refs.end_to_end;
  const HostTensor& bound = stage_local ? (tight ? refs.local_tight : refs.local_bound)
                                        : (tight ? refs.end_to_end_tight : refs.end_to_end_bound);
  if (reference.empty() || bound.empty()) return d;  // not kept: nothing to test
  d.reference_tensor = &reference;
  d.kernel = captured_head(run.captured[index], d.b, d.h, inputs.problem.shape.q_len) * r.value_scale;
  d.reference = head_matrix(reference, d.b, d.h);
  d.bound = head_matrix(bound, d.b, d.h);

  std::vector<std::int64_t> judged;
  if (rows && !rows->all) judged = rows->per_head[static_cast<std::size_t>(d.b * inputs.problem.shape.heads + d.h)];
  const std::int64_t q_len = inputs.problem.q_len_of(d.b), kv_len = inputs.problem.kv_len_of(d.b);
  const bool keys = d.key_indexed();
  auto visit = [&](Eigen::Index i) {
    for (Eigen::Index c = 0; c < d.kernel.cols(); ++c) {
      if (keys && d.col_offset + c >= kv_len) break;
      const double k = d.kernel(i, c), x = d.reference(i, c), bnd = d.bound(i, c);
      if (normalized_error(k, x, bnd) <= 1.0) continue;
      ++d.bad_total;
      if (d.bad.size() < kMaxBad) {
        d.bad.push_back({i, r.dims.size() == 4 ? (keys ? d.col_offset + c : c) : -1, i, c, k, x, bnd});
      }
    }
  };
  if (!judged.empty()) {
    for (std::int64_t i : judged) {
      if (i < q_len && i < d.kernel.rows()) visit(i);
    }
  } else {
    for (Eigen::Index i = 0; i < std::min<Eigen::Index>(q_len, d.kernel.rows()); ++i) visit(i);
  }
  return d;
}

Eigen::RowVectorXd Diagnosis::row_scores(Eigen::Index row, std::int64_t keys, bool masked) const {
  Eigen::RowVectorXd s = head.scale * (head.q.row(row) * head.k().topRows(keys).transpose());
  if (head.softcap > 0) s = (head.softcap * (s.array() / head.softcap).tanh()).matrix();
  if (masked) {
    for (std::int64_t j = 0; j < keys; ++j) s(j) += head.bias_at(row, j);
  }
  return s;
}

std::optional<MatrixR> Diagnosis::captured_head(Quantity q, int split, int tile) const {
  for (const Captured& c : run.captured) {
    if (!c.present || c.tensor.empty()) continue;
    const Stage& stage = run.graph.stages[c.stage];
    const StageOutput& out = stage.outputs[c.output];
    if (out.quantity == q && stage.split == split && stage.tile == tile) {
      return fc::captured_head(c, b, h, inputs.problem.shape.q_len) * out.value_scale;
    }
  }
  return std::nullopt;
}

std::optional<StageWeights> stage_weights(const Diagnosis& d) {
  const int tile = d.result.tile;
  std::optional<MatrixR> w = tile < 0 ? d.captured_head(Quantity::probs, -1, -1)
                                      : d.captured_head(Quantity::p_tilde, d.result.split, tile);
  if (!w) return std::nullopt;
  return StageWeights{std::move(*w), tile < 0 ? 0 : tile * d.run.graph.algorithm.tile_width};
}

std::vector<Explanation> test_hypotheses(const Diagnosis& d) {
  if (d.bad.empty()) return {};
  return {test_mask_mismatch(d),    test_index_overflow(d),   test_wrong_operand(d),   test_wrong_value_operand(d),
          test_key_range(d),        test_rescale_factor(d),   test_misplaced_values(d), test_scale_mismatch(d),
          test_other_problem(d),    test_lower_precision(d)};
}

Explanation best_explanation(const std::vector<Explanation>& all) {
  const Explanation* best = nullptr;
  for (const Explanation& e : all) {
    if (e.cause.empty() || e.explained <= 0) continue;
    if (!best || e.explained > best->explained + 1e-12) best = &e;
  }
  if (!best) return {};
  if (best->explained >= 0.9) return *best;
  // A partial explanation of fewer than half the bad elements points at a cause more often than
  // it finds one (a bug report's output read as "the reference times 0.99" in a third of it).
  if (best->explained < 0.5) return {"unknown", best->explained, "no hypothesis explains half of the bad elements"};
  return {"unknown", best->explained, "no hypothesis explains 90% of the bad elements; best partial: " + best->cause +
                                          ", " + best->evidence};
}

std::string named_factor(const Diagnosis& d, double factor) {
  const double scale = d.head.scale, dim = static_cast<double>(d.head.q.cols());
  const std::pair<double, const char*> named[] = {
      {scale, "the softmax scale"}, {1 / scale, "1 / the softmax scale"}, {scale * scale, "the scale squared"},
      {std::sqrt(dim), "sqrt(D)"}, {1 / std::sqrt(dim), "1 / sqrt(D)"}, {std::log(2.0), "ln 2"},
      {1 / std::log(2.0), "log2(e)"}, {2.0, "2"}, {0.5, "1/2"}, {1.5, "1.5"}};
  for (const auto& [value, name] : named) {
    if (std::fabs(factor / value - 1) < 1e-3) return std::string(" (") + name + ")";
  }
  return "";
}

std::string explained_text(const Diagnosis& d, std::size_t explained) {
  std::ostringstream s;
  const std::size_t tested = d.bad.size();
  s << explained << " of " << tested << " bad elements";
  if (static_cast<std::int64_t>(tested) < d.bad_total) s << " tested (of " << d.bad_total << ")";
  return s.str();
}

}  // namespace fc

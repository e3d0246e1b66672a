#include "harness/triage/minimize.h"

#include <algorithm>
#include <memory>

#include "kernels/common/device_inputs.h"

namespace fc {
namespace {

HostTensor slice(const HostTensor& t, std::int64_t b, std::int64_t h, std::int64_t begin, std::int64_t end,
                 std::int64_t dims) {
  const Dims& d = t.dims();
  HostTensor out(t.dtype(), {1, 1, end - begin, dims});
  for (std::int64_t r = begin; r < end; ++r)
    for (std::int64_t c = 0; c < dims; ++c) out.set((r - begin) * dims + c, t.get(((b * d[1] + h) * d[2] + r) * d[3] + c));
  return out;
}

class Minimizer {
 public:
  Minimizer(Implementation& impl, const Divergence& failure, Progress* progress)
      : impl_(impl), failure_(failure), progress_(progress) {}

  // Does the implementation still fail the same way on `candidate`?
  bool still_fails(const AttentionInputs& candidate) {
    if (impl_.unsupported(candidate.problem)) return false;
    ++runs;
    if (progress_) progress_->advance();
    std::unique_ptr<DeviceInputs> device;
    if (impl_.on_gpu()) device = std::make_unique<DeviceInputs>(candidate, nullptr);
    const CaseDescription d = describe_case(candidate, candidate.problem.shape.to_string(), "", "", std::nullopt);
    const CaseResult r = judge_case(impl_, candidate, d, device.get());
    return r.divergence && r.divergence->kind == failure_.kind && r.divergence->cause == failure_.cause;
  }

  int runs = 0;

 private:
  Implementation& impl_;
  const Divergence& failure_;
  Progress* progress_;
};

// ceil(log2(n)), the steps of a binary search over n.
std::int64_t log2_ceil(std::int64_t n) {
  std::int64_t steps = 0;
  while ((std::int64_t{1} << steps) < n) ++steps;
  return steps;
}

}  // namespace

AttentionInputs slice_case(const AttentionInputs& in, std::int64_t b, std::int64_t h, std::int64_t row_begin,
                           std::int64_t row_end, std::int64_t key_begin, std::int64_t key_end, std::int64_t head_dim) {
  const Shape& s = in.problem.shape;
  AttentionInputs out;
  out.problem.shape = {1, 1, row_end - row_begin, key_end - key_begin, head_dim};
  out.problem.dtype = in.problem.dtype;
  out.problem.scale = in.problem.scale;
  out.problem.softcap = in.problem.softcap;
  out.q = slice(in.q, b, h, row_begin, row_end, head_dim);
  out.k = slice(in.k, b, s.kv_head_of(h), key_begin, key_end, head_dim);
  out.v = slice(in.v, b, s.kv_head_of(h), key_begin, key_end, head_dim);
  // Every part of the mask (window, ALiBi, the sequence's own alignment) folded into one
  // dense mask: a bias where any score carries one, else a boolean one.
  const Mask& m = in.problem.mask;
  const bool folded = m.causal != Causal::none || !m.key_lengths.empty() || m.has_dense() || m.window.active() ||
                      m.has_alibi() || in.problem.layout.varlen();
  if (folded) {
    const bool bias = m.dense_is_bias() || m.has_alibi();
    HostTensor dense(bias ? DType::f32 : DType::boolean, {1, 1, row_end - row_begin, key_end - key_begin});
    for (std::int64_t i = row_begin; i < row_end; ++i)
      for (std::int64_t j = key_begin; j < key_end; ++j) {
        const double v = mask_bias(in.problem, b, h, i, j);
        dense.set((i - row_begin) * (key_end - key_begin) + (j - key_begin), bias ? v : (v == 0 ? 1.0 : 0.0));
      }
    out.problem.mask.dense = dense;
  }
  out.source = in.source + " (minimized)";
  validate(out, "minimized case");
  return out;
}

std::optional<Minimized> minimize(Implementation& impl, const AttentionInputs& in, const Divergence& failure,
                                  Progress* progress) {
  Minimizer m(impl, failure, progress);
  const Shape& s = in.problem.shape;
  // The head, the row windows, two binary searches over the keys, the head dims, the last run.
  if (progress) progress->add_total(1 + log2_ceil(s.q_len) + 2 + 2 * log2_ceil(s.kv_len) + 5 + 1);
  const Index4& at = failure.index;
  Minimized result;
  const std::int64_t b = std::max<std::int64_t>(at.b, 0), h = std::max<std::int64_t>(at.h, 0);
  // Only what exists of the sequence: rows and keys past its lengths are no part of the case.
  const std::int64_t rows = std::max<std::int64_t>(1, in.problem.q_len_of(b));
  const std::int64_t keys = std::max<std::int64_t>(1, in.problem.kv_len_of(b));
  std::int64_t row0 = 0, row1 = rows, key0 = 0, key1 = keys, dims = s.head_dim;
  auto candidate = [&] { return slice_case(in, b, h, row0, row1, key0, key1, dims); };

  if (!m.still_fails(candidate())) return std::nullopt;  // not reproducible on its own head
  result.steps.push_back("kept batch " + std::to_string(b) + ", head " + std::to_string(h));

  // Query rows: the failing row alone, else windows around it doubling.
  const std::int64_t row = std::clamp<std::int64_t>(at.row, 0, rows - 1);
  for (std::int64_t half = 0;; half = half ? half * 2 : 1) {
    row0 = std::max<std::int64_t>(0, row - half);
    row1 = std::min(rows, row + half + 1);
    if (row0 == 0 && row1 == rows) break;  // every row: known to fail
    if (m.still_fails(candidate())) break;
  }
  result.steps.push_back("query rows [" + std::to_string(row0) + ", " + std::to_string(row1) + ")");

  // Keys: the shortest prefix, then the shortest suffix of it (binary search; the failure is
  // assumed to stay once the keys that cause it are in).
  std::int64_t lo = 1, hi = key1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi) / 2, keep = key1;
    key1 = mid;
    if (m.still_fails(candidate())) hi = mid; else lo = mid + 1;
    key1 = keep;
  }
  key1 = hi;
  lo = 0;
  hi = key1 - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2, keep = key0;
    key0 = mid;
    if (m.still_fails(candidate())) lo = mid; else hi = mid - 1;
    key0 = keep;
  }
  key0 = lo;
  result.steps.push_back("keys [" + std::to_string(key0) + ", " + std::to_string(key1) + ")");

  // Head dim: the smallest that still fails (and that the implementation runs).
  for (std::int64_t d : {8, 16, 32, 64, 128}) {
    if (d >= dims) break;
    const std::int64_t keep = dims;
    dims = d;
    if (m.still_fails(candidate())) break;
    dims = keep;
  }
  result.steps.push_back("head dim " + std::to_string(dims));

  result.inputs = candidate();
  std::unique_ptr<DeviceInputs> device;
  if (impl.on_gpu()) device = std::make_unique<DeviceInputs>(result.inputs, nullptr);
  const CaseDescription d = describe_case(result.inputs, result.inputs.problem.shape.to_string() + " minimized from " +
                                                             in.problem.shape.to_string(),
                                          result.inputs.problem.mask.describe(), "", std::nullopt);
  result.judged = judge_case_keeping(impl, result.inputs, d, device.get(), true);
  result.runs = m.runs + 1;
  if (progress) progress->advance();
  return result;
}

}  // namespace fc

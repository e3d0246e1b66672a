#include "reference/evaluator.h"

#include <cuda_runtime_api.h>

#include "core/check.h"
#include "core/error.h"
#include "reference/attention.h"

namespace fc {
namespace {

bool sized(const MatrixR& m, std::int64_t rows, std::int64_t cols) { return m.rows() == rows && m.cols() == cols; }

// The top-left corner of each matrix b has (an exact b has no bounds; a b without tight).
Bounded top_left(const Bounded& b, std::int64_t rows, std::int64_t cols) {
  const auto corner = [&](const MatrixR& m) { return m.size() > 0 ? MatrixR(m.topLeftCorner(rows, cols)) : MatrixR(); };
  Bounded out;
  out.value = corner(b.value);
  out.bound = corner(b.bound);
  out.tight = corner(b.tight);
  out.format = b.format;
  return out;
}

class HostEvaluator final : public HeadEvaluator {
 public:
  explicit HostEvaluator(const HeadInputs& in) : in_(in) {}
  const HeadInputs& inputs() const override { return in_; }

  Bounded qk(std::int64_t col_begin, std::int64_t col_end, const Arithmetic& a) const override {
    return eval_qk(in_, col_begin, col_end, a);
  }
  SoftmaxResult softmax(const Bounded& scores, const Arithmetic& a) const override { return eval_softmax(scores, a); }
  OnlineSoftmaxResult online_softmax(const Bounded& scores_tile, const Bounded& prev_max, const Bounded& prev_sum,
                                     const Arithmetic& a) const override {
    return eval_online_softmax(scores_tile, prev_max, prev_sum, a);
  }
  Bounded rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                  const Arithmetic& a) const override {
    return eval_rescale(acc, prev_max, new_max, a);
  }
  Bounded pv(const Bounded& p, std::int64_t key_begin, std::int64_t key_end, const Bounded* acc,
             const Arithmetic& a) const override {
    return eval_pv(p, in_.v().middleRows(key_begin, key_end - key_begin), acc, a);
  }
  Bounded normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a) const override {
    return eval_normalize(acc, sum, a);
  }
  Bounded within_value_range(const Bounded& out, std::int64_t key_begin, std::int64_t key_end,
                             const Arithmetic& pv) const override {
    return eval_within_value_range(out, in_.v().middleRows(key_begin, key_end - key_begin), pv);
  }
  Bounded lse(const Bounded& max, const Bounded& sum, const Arithmetic& a) const override {
    return eval_lse(max, sum, a);
  }
  Bounded combine(const std::vector<Bounded>& outs, const std::vector<Bounded>& lses,
                  const Arithmetic& a) const override {
    return eval_combine(outs, lses, a);
  }
  Bounded combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a) const override {
    return eval_combine_lse(lses, a);
  }

  Bounded to_host(const Bounded& b) const override {
    if (b.on_device()) throw Error("the host evaluator cannot read a tensor that lives on the GPU");
    return b;
  }
  Bounded resident(const Bounded& b) const override { return to_host(b); }
  Metrics compare(const HeadSpot& spot, const Bounded& kernel, const Bounded& reference, std::int64_t rows,
                  std::int64_t cols, DType kernel_format, BoundChoice judged_by) const override {
    // Only what exists is compared (varlen: rows and keys past a sequence's lengths do not).
    const MatrixR kept = sized(kernel.value, rows, cols) ? MatrixR() : MatrixR(kernel.value.topLeftCorner(rows, cols));
    const MatrixR& k = sized(kernel.value, rows, cols) ? kernel.value : kept;
    if (sized(reference.value, rows, cols)) return compare_head(spot, k, reference, kernel_format, judged_by);
    return compare_head(spot, k, top_left(reference, rows, cols), kernel_format, judged_by);
  }

 private:
  const HeadInputs& in_;
};

class HostEvaluators final : public EvaluatorSource {
 public:
  std::unique_ptr<HeadEvaluator> for_head(const HeadInputs& in) const override { return host_evaluator(in); }
  const char* device() const override { return "cpu"; }
};

}  // namespace

Bounded captured_on_host(const CapturedTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>* rows,
                         double scale, DType format) {
  if (t.host) {
    return Bounded::exact((rows ? head_rows(*t.host, b, h, *rows) : head_matrix(*t.host, b, h)) * scale, format);
  }
  // Kept on the device: the head comes to the host first.
  const HeadLayout l = head_layout(t.dims, b, h);
  HostTensor head(t.dtype, Dims{1, 1, l.rows, l.cols});
  const std::size_t width = dtype_size(t.dtype);
  const auto* first = static_cast<const unsigned char*>(t.device) + static_cast<std::size_t>(l.offset) * width;
  FC_CUDA(cudaMemcpy(head.data(), first, head.nbytes(), cudaMemcpyDeviceToHost));
  return captured_on_host(CapturedTensor::on_host(head), 0, 0, rows, scale, format);
}

Bounded HeadEvaluator::captured(const CapturedTensor& t, std::int64_t b, std::int64_t h,
                                const std::vector<std::int64_t>* rows, double scale, DType format) const {
  return captured_on_host(t, b, h, rows, scale, format);
}

std::vector<OnlineSoftmaxResult> HeadEvaluator::online_softmax_each(const std::vector<OnlineSoftmaxItem>& items,
                                                                  const Arithmetic& a) const {
  std::vector<OnlineSoftmaxResult> out;
  for (const OnlineSoftmaxItem& i : items) out.push_back(online_softmax(*i.scores, *i.prev_max, *i.prev_sum, a));
  return out;
}

std::vector<Bounded> HeadEvaluator::rescale_each(const std::vector<RescaleItem>& items, const Arithmetic& a) const {
  std::vector<Bounded> out;
  for (const RescaleItem& i : items) out.push_back(rescale(*i.acc, *i.prev_max, *i.new_max, a));
  return out;
}

std::vector<Bounded> HeadEvaluator::pv_each(const std::vector<PvItem>& items, const Arithmetic& a) const {
  std::vector<Bounded> out;
  for (const PvItem& i : items) out.push_back(pv(*i.p, i.key_begin, i.key_end, i.acc, a));
  return out;
}

std::int64_t HeadEvaluator::whole_tiles(std::int64_t, std::int64_t, std::int64_t, const ChainArithmetic&,
                                        std::vector<TileReference>&) const {
  return 0;
}

std::vector<Bounded> HeadEvaluator::captured_each(const std::vector<CapturedTensor>& tensors, std::int64_t b,
                                                  std::int64_t h, const std::vector<std::int64_t>* rows, double scale,
                                                  DType format) const {
  std::vector<Bounded> out;
  for (const CapturedTensor& t : tensors) out.push_back(captured(t, b, h, rows, scale, format));
  return out;
}

std::vector<Metrics> HeadEvaluator::compare_each(const std::vector<CompareItem>& items, BoundChoice judged_by) const {
  std::vector<Metrics> out;
  for (const CompareItem& i : items) {
    out.push_back(compare(i.spot, *i.kernel, *i.reference, i.rows, i.cols, i.kernel_format, judged_by));
  }
  return out;
}

std::int64_t EvaluatorSource::block_elements() const { return kRowBlockElements; }

std::unique_ptr<HeadEvaluator> host_evaluator(const HeadInputs& in) { return std::make_unique<HostEvaluator>(in); }

const EvaluatorSource& host_evaluators() {
  static const HostEvaluators source;
  return source;
}

}  // namespace fc

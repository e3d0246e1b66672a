#pragma once
// The GPU reference's evaluator of one head (or block of rows), shared by the files that
// define it: gpu_evaluator.cpp (its inputs on the device and the whole-tensor stage
// functions), tile_evaluation.cpp (tiles evaluated as stacks) and head_io.cpp (captures
// widened in, comparisons read back). Private to reference/gpu/.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/check.h"
#include "reference/attention.h"
#include "reference/evaluator.h"
#include "reference/gpu/chain_kernels.h"
#include "reference/gpu/device_kv_cache.h"
#include "reference/gpu/device_matrix.h"
#include "reference/gpu/stage_kernels.h"
#include "reference/gpu/thread_pool.h"
#include "reference/gpu/tile_stack.h"
#include "reference/gpu/transfer.h"
#include "reference/stage_terms.h"
#include "stages/device_memory.h"

namespace fc::gpu {

// Keys summed per GEMM when the largest partial sum of P.V is tracked: as eval_pv does.
constexpr std::int64_t kPrefixBlock = 64;

// The first of `rows` (sorted) when they are consecutive (0 when there are none).
std::optional<std::int64_t> first_of_consecutive(const std::vector<std::int64_t>& rows);
// The head's bias [rows, keys] on the device: uploaded when the inputs hold it as a matrix,
// else formed there from the mask (only a dense mask part travels, as stored when it can).
DeviceMatrix form_bias(const HeadInputs& in, cudaStream_t s);

// What P.V's GEMMs formed for a stack of tiles (chain_kernels.h, PvProducts), kept for as
// long as its bounds are evaluated.
struct PvWork {
  DeviceMatrix value_blocks, nominal_blocks, magnitude, worst, tight, squares, operand_floor, v_norm;
  std::int64_t blocks = 0, rows_per_tile = 0;
  bool tensor_cores = false, rounded = false;
  stage_math::PvTerms terms;

  gpu::PvProducts products() const {
    gpu::PvProducts x{&value_blocks, &nominal_blocks};
    x.blocks = blocks;
    x.rows_per_tile = rows_per_tile;
    x.magnitude = tensor_cores ? &magnitude : nullptr;
    x.propagated_worst = worst.size() > 0 ? &worst : nullptr;
    x.propagated_tight = tight.size() > 0 ? &tight : nullptr;
    x.squares = rounded ? &squares : nullptr;
    x.operand_floor = &operand_floor;
    x.v_norm = rounded ? &v_norm : nullptr;
    return x;
  }
};

struct ThreadContext {
  explicit ThreadContext(DeviceKvCache& kv) : kv_cache(kv) {}
  gpu::OwnPool pool;  // destroyed last, after the stream's work is done
  CudaStream stream;
  gpu::CublasHandle cublas{stream.get()};
  DeviceKvCache& kv_cache;  // the source's, shared by its threads
  ~ThreadContext() { cudaStreamSynchronize(stream.get()); }

  // in's K and V on the device: the ones kept under its kv_id (uploaded once by whichever
  // thread asked first), else this block's own.
  DeviceKv kv_of(const HeadInputs& in) {
    const std::size_t bytes = static_cast<std::size_t>(in.k().size() + in.v().size()) * sizeof(double);
    return kv_cache.get(in.kv_id, bytes, [&](bool shared) {
      DeviceKv uploaded{std::make_shared<const DeviceMatrix>(gpu::upload(in.k(), stream.get())),
                        std::make_shared<const DeviceMatrix>(gpu::upload(in.v(), stream.get()))};
      if (shared) FC_CUDA(cudaStreamSynchronize(stream.get()));  // complete before another stream reads it
      return uploaded;
    });
  }
};

class GpuHeadEvaluator final : public HeadEvaluator {
 public:
  GpuHeadEvaluator(ThreadContext& ctx, const HeadInputs& in)
      : ctx_(ctx),
        s_(ctx.stream.get()),
        in_(in),
        kv_(ctx.kv_of(in)),
        q_(gpu::upload(in.q, s_)),
        k_(*kv_.first),
        v_(*kv_.second),
        bias_(form_bias(in, s_)) {}

  ~GpuHeadEvaluator() override { cudaStreamSynchronize(s_); }

  void finish_queued() const override { FC_CUDA(cudaStreamSynchronize(s_)); }

  const HeadInputs& inputs() const override { return in_; }

  Bounded qk(std::int64_t col_begin, std::int64_t col_end, const Arithmetic& a) const override {
    return resident_on_device(qk_stack(col_begin, 1, col_end - col_begin, a));
  }

  SoftmaxResult softmax(const Bounded& scores, const Arithmetic& a) const override {
    const DevicePtr s = device_of(scores);
    const std::int64_t rows = s->value.rows();
    DeviceBounded p = gpu::allocate_bounded(rows, s->value.cols(), a.out, s_);
    DeviceBounded max = gpu::allocate_bounded(rows, 1, scores.format, s_);
    DeviceBounded sum = gpu::allocate_bounded(rows, 1, DType::f32, s_);
    gpu::softmax_rows(*s, p, max, sum, output_terms(a), s_);
    return {resident_on_device(std::move(p)), resident_on_device(std::move(max)), resident_on_device(std::move(sum))};
  }

  OnlineSoftmaxResult online_softmax(const Bounded& scores_tile, const Bounded& prev_max, const Bounded& prev_sum,
                                     const Arithmetic& a) const override {
    return online_softmax_each({{&scores_tile, &prev_max, &prev_sum}}, a)[0];
  }

  Bounded rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                  const Arithmetic& a) const override {
    return rescale_each({{&acc, &prev_max, &new_max}}, a)[0];
  }

  Bounded pv(const Bounded& p, std::int64_t key_begin, std::int64_t key_end, const Bounded* acc,
             const Arithmetic& a) const override {
    return pv_each({{&p, key_begin, key_end, acc}}, a)[0];
  }

  Bounded normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a) const override {
    require_rows(acc, sum, "normalize");
    const DevicePtr x = device_of(acc), l = device_of(sum);
    DeviceBounded out = gpu::allocate_bounded(x->value.rows(), x->value.cols(), a.out, s_);
    gpu::normalize_rows(*x, *l, out, output_terms(a), s_);
    return resident_on_device(std::move(out));
  }

  Bounded within_value_range(const Bounded& out, std::int64_t key_begin, std::int64_t key_end,
                             const Arithmetic& pv) const override {
    if (key_end <= key_begin) return out;
    const DevicePtr x = device_of(out);
    if (x->value.cols() != v_.cols()) throw Error("reference: the output and v disagree in columns");
    DeviceBounded capped = gpu::allocate_bounded(x->value.rows(), x->value.cols(), out.format, s_);
    gpu::cap_to_value_range(*x, v_, key_begin, key_end - key_begin, capped,
                            range_terms(pv, out.format, key_end - key_begin), s_);
    return resident_on_device(std::move(capped));
  }

  Bounded lse(const Bounded& max, const Bounded& sum, const Arithmetic& a) const override {
    require_rows(max, sum, "lse");
    const DevicePtr m = device_of(max), l = device_of(sum);
    DeviceBounded out = gpu::allocate_bounded(m->value.rows(), 1, a.out, s_);
    gpu::lse_rows(*m, *l, out, output_terms(a), s_);
    return resident_on_device(std::move(out));
  }

  Bounded combine(const std::vector<Bounded>& outs, const std::vector<Bounded>& lses,
                  const Arithmetic& a) const override {
    if (outs.empty() || outs.size() != lses.size()) throw Error("reference: combine needs one lse per partial");
    std::vector<DevicePtr> parts, weights;
    for (std::size_t t = 0; t < outs.size(); ++t) {
      parts.push_back(device_of(outs[t]));
      weights.push_back(device_of(lses[t]));
    }
    DeviceBounded out = gpu::allocate_bounded(parts[0]->value.rows(), parts[0]->value.cols(), a.out, s_);
    gpu::combine_rows(pointers(parts), pointers(weights), out, output_terms(a), s_);
    return resident_on_device(std::move(out));
  }

  Bounded combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a) const override {
    if (lses.empty()) throw Error("reference: combine needs at least one lse");
    std::vector<DevicePtr> weights;
    for (const Bounded& l : lses) weights.push_back(device_of(l));
    DeviceBounded out = gpu::allocate_bounded(weights[0]->value.rows(), 1, a.out, s_);
    gpu::combine_lse_rows(pointers(weights), out, output_terms(a), s_);
    return resident_on_device(std::move(out));
  }

  std::vector<OnlineSoftmaxResult> online_softmax_each(const std::vector<OnlineSoftmaxItem>& items,
                                                       const Arithmetic& a) const override;
  std::vector<Bounded> rescale_each(const std::vector<RescaleItem>& items, const Arithmetic& a) const override;
  std::vector<Bounded> pv_each(const std::vector<PvItem>& items, const Arithmetic& a) const override;
  std::int64_t whole_tiles(std::int64_t col_begin, std::int64_t col_end, std::int64_t tile_width,
                           const ChainArithmetic& a, std::vector<TileReference>& tiles) const override;

  Bounded captured(const CapturedTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>* rows,
                   double scale, DType format) const override {
    // A format not widened here: converted on the host.
    if (!gpu::widens(t.dtype)) return resident(HeadEvaluator::captured(t, b, h, rows, scale, format));
    return captured_each({t}, b, h, rows, scale, format)[0];
  }
  std::vector<Bounded> captured_each(const std::vector<CapturedTensor>& tensors, std::int64_t b, std::int64_t h,
                                     const std::vector<std::int64_t>* rows, double scale,
                                     DType format) const override;

  Bounded to_host(const Bounded& b) const override { return b.on_device() ? gpu::download(*b.device, s_) : b; }
  Bounded resident(const Bounded& b) const override {
    Bounded r;
    r.format = b.format;
    r.device = device_of(b);
    return r;
  }
  Metrics compare(const HeadSpot& spot, const Bounded& kernel, const Bounded& reference, std::int64_t rows,
                  std::int64_t cols, DType kernel_format, BoundChoice judged_by) const override {
    return compare_each({{spot, &kernel, &reference, rows, cols, kernel_format}}, judged_by)[0];
  }
  std::vector<Metrics> compare_each(const std::vector<CompareItem>& items, BoundChoice judged_by) const override;

 private:
  static void require_rows(const Bounded& a, const Bounded& b, const char* what) {
    if (a.rows() != b.rows()) throw Error(std::string("reference: row count mismatch in ") + what);
  }
  static std::vector<const DeviceBounded*> pointers(const std::vector<DevicePtr>& v) {
    std::vector<const DeviceBounded*> p;
    for (const DevicePtr& b : v) p.push_back(b.get());
    return p;
  }
  // b on the device: where it lives, else uploaded (an exact one without bound matrices).
  DevicePtr device_of(const Bounded& b) const {
    if (b.device) {
      // Kept in stream order on its own thread's stream alone (evaluator.h).
      if (b.device->value.stream() != s_) throw Error("gpu reference: a tensor of another thread's evaluator");
      return b.device;
    }
    return std::make_shared<const DeviceBounded>(gpu::upload(b, s_));
  }

  // |x| as the accumulation sees it (stage_terms.h, nominal_floor), kept per input and floor.
  const DeviceMatrix& nominal(const DeviceMatrix& x, double floor) const {
    DeviceMatrix& m = nominal_[{x.data(), floor}];
    if (!m.data() && x.size() > 0) {
      m = DeviceMatrix(x.rows(), x.cols(), s_);
      gpu::nominal(x, floor, m, s_);
    }
    return m;
  }
  const DeviceMatrix& squared_values() const {
    if (!v_squared_.data() && v_.size() > 0) {
      v_squared_ = DeviceMatrix(v_.rows(), v_.cols(), s_);
      gpu::square(v_, v_squared_, s_);
    }
    return v_squared_;
  }

  DevicePtr qk_stack(std::int64_t col_begin, std::int64_t tiles, std::int64_t width, const Arithmetic& a) const;
  std::unique_ptr<PvWork> pv_products(const DeviceBounded& p, std::int64_t tiles, std::int64_t key_begin,
                                      const Arithmetic& a) const;

  ThreadContext& ctx_;
  cudaStream_t s_;
  const HeadInputs& in_;
  DeviceKv kv_;  // k_ and v_ live here
  DeviceMatrix q_;
  const DeviceMatrix &k_, &v_;
  DeviceMatrix bias_;
  mutable std::map<std::pair<const double*, double>, DeviceMatrix> nominal_;
  mutable DeviceMatrix v_squared_;
};

}  // namespace fc::gpu

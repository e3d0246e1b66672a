#include "reference/gpu/gpu_evaluator.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/check.h"
#include "reference/gpu/compare_kernel.h"
#include "reference/gpu/device_matrix.h"
#include "reference/gpu/stage_kernels.h"
#include "reference/gpu/thread_pool.h"
#include "reference/gpu/transfer.h"
#include "reference/stage_terms.h"
#include "stages/device_memory.h"

namespace fc {
namespace {

using gpu::DeviceBounded;
using gpu::DeviceMatrix;

// Keys summed per GEMM when the largest partial sum of P.V is tracked: as eval_pv does.
constexpr std::int64_t kPrefixBlock = 64;
// Heads (blocks of rows) evaluated at once, each on its own stream and memory pool. More host
// threads contend in the CUDA driver: on the H100 box (2026-11-26) a fused kernel's tile-by-
// tile judgement (wmma-fused 1,4,16384) took 22.7 s with 4, 27.9 s with 8 and 31.8 s with 16,
// while naive 16,16,4096 (large blocks) took 5.6, 5.8 and 5.1 s.
constexpr int kConcurrentHeads = 4;
// Rows x keys of a block: 64 MiB an FP64 tensor, a GiB or so of them a block in flight; four
// times the host's, so that a block's launches and GEMMs are large enough to fill the device.
constexpr std::int64_t kDeviceBlockElements = std::int64_t{1} << 23;
// FP64 tensors of a block's size one evaluator holds at most: the end-to-end and stage-local
// references with their bounds, the captures widened, the bias, the GEMMs' temporaries, and
// P.V's prefix blocks (D / 64 tensors of the block's size each, four at D 256).
constexpr std::int64_t kTensorsPerBlock = 24;

using DevicePtr = std::shared_ptr<const DeviceBounded>;

// A bounded tensor that lives on the device.
Bounded resident_on_device(DeviceBounded d) {
  Bounded b;
  b.format = d.format;
  b.device = std::make_shared<const DeviceBounded>(std::move(d));
  return b;
}

// The first of `rows` (sorted) when they are consecutive (0 when there are none).
std::optional<std::int64_t> first_of_consecutive(const std::vector<std::int64_t>& rows) {
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i] != rows[0] + static_cast<std::int64_t>(i)) return std::nullopt;
  }
  return rows.empty() ? 0 : rows[0];
}

// The head's bias [rows, keys] on the device: uploaded when the inputs hold it as a matrix,
// else formed there from the mask (only a dense mask part travels, as stored when it can).
DeviceMatrix form_bias(const HeadInputs& in, cudaStream_t s) {
  if (!in.masked_rows || in.bias.size() > 0) return gpu::upload(in.bias, s);
  const MaskedRows& m = *in.masked_rows;
  const std::int64_t rows = in.q.rows(), keys = in.k.rows();
  const std::optional<std::int64_t> first = first_of_consecutive(m.rows);
  DeviceMatrix dense;
  if (m.mask.dense) {
    if (first && gpu::widens(m.dense->dtype()) && m.mask.dense_row_stride == keys) {
      dense = DeviceMatrix(rows, keys, s);
      const auto* stored = static_cast<const unsigned char*>(m.dense->data()) +
                           static_cast<std::size_t>(m.mask.dense_index(*first, 0)) * dtype_size(m.dense->dtype());
      gpu::widen(stored, gpu::Memory::host, m.dense->dtype(), rows * keys, 1.0, dense.data(), s);
    } else {
      MatrixR values(rows, keys);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < keys; ++j) values(r, j) = m.dense_value(r, j);
      }
      dense = gpu::upload(values, s);
    }
  }
  DeviceMatrix row_indices;  // exact as doubles (below 2^53)
  if (!first) {
    MatrixR indices(1, rows);
    for (std::int64_t r = 0; r < rows; ++r) indices(0, r) = static_cast<double>(m.rows[static_cast<std::size_t>(r)]);
    row_indices = gpu::upload(indices, s);
  }
  DeviceMatrix bias(rows, keys, s);
  gpu::mask_bias(m.mask, first ? nullptr : &row_indices, first.value_or(0), m.mask.dense ? &dense : nullptr, bias, s);
  return bias;
}

struct ThreadContext {
  gpu::OwnPool pool;  // destroyed last, after the stream's work is done
  CudaStream stream;
  gpu::CublasHandle cublas{stream.get()};
  ~ThreadContext() { cudaStreamSynchronize(stream.get()); }
};

class GpuHeadEvaluator final : public HeadEvaluator {
 public:
  GpuHeadEvaluator(ThreadContext& ctx, const HeadInputs& in)
      : ctx_(ctx),
        s_(ctx.stream.get()),
        in_(in),
        q_(gpu::upload(in.q, s_)),
        k_(gpu::upload(in.k, s_)),
        v_(gpu::upload(in.v, s_)),
        bias_(form_bias(in, s_)) {}

  ~GpuHeadEvaluator() override { cudaStreamSynchronize(s_); }

  const HeadInputs& inputs() const override { return in_; }

  Bounded qk(std::int64_t col_begin, std::int64_t col_end, const Arithmetic& a) const override {
    const std::int64_t rows = q_.rows(), n = col_end - col_begin;
    DeviceMatrix t(rows, n, s_), magnitude(rows, n, s_);
    gpu::gemm(ctx_.cublas, in_.scale, gpu::whole(q_), gpu::transposed(gpu::rows_of(k_, col_begin, n)), 0, t);
    const double floor = nominal_floor(a);
    gpu::gemm(ctx_.cublas, in_.scale, gpu::whole(nominal(q_, floor)),
              gpu::transposed(gpu::rows_of(nominal(k_, floor), col_begin, n)), 0, magnitude);
    DeviceBounded out = gpu::allocate_bounded(rows, n, a.out, s_);
    gpu::qk_elements(t, magnitude, bias_, col_begin, qk_terms(a, in_.q.cols(), in_.scale, in_.softcap), out, s_);
    return resident_on_device(std::move(out));
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
    require_rows(scores_tile, prev_max, "online softmax");
    require_rows(scores_tile, prev_sum, "online softmax");
    const DevicePtr s = device_of(scores_tile), m = device_of(prev_max), l = device_of(prev_sum);
    const std::int64_t rows = s->value.rows();
    DeviceBounded p = gpu::allocate_bounded(rows, s->value.cols(), a.out, s_);
    DeviceBounded max = gpu::allocate_bounded(rows, 1, DType::f32, s_);
    DeviceBounded sum = gpu::allocate_bounded(rows, 1, DType::f32, s_);
    DeviceBounded rescale = gpu::allocate_bounded(rows, 1, DType::f32, s_);
    gpu::online_softmax_rows(*s, *m, *l, p, max, sum, rescale, output_terms(a), s_);
    return {resident_on_device(std::move(p)), resident_on_device(std::move(max)), resident_on_device(std::move(sum)),
            resident_on_device(std::move(rescale))};
  }

  Bounded rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                  const Arithmetic& a) const override {
    require_rows(acc, prev_max, "rescale");
    require_rows(acc, new_max, "rescale");
    const DevicePtr x = device_of(acc), mp = device_of(prev_max), mn = device_of(new_max);
    DeviceBounded out = gpu::allocate_bounded(x->value.rows(), x->value.cols(), a.out, s_);
    gpu::rescale_rows(*x, *mp, *mn, out, output_terms(a), s_);
    return resident_on_device(std::move(out));
  }

  Bounded pv(const Bounded& p, std::int64_t key_begin, std::int64_t key_end, const Bounded* acc,
             const Arithmetic& a) const override;

  Bounded normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a) const override {
    require_rows(acc, sum, "normalize");
    const DevicePtr x = device_of(acc), l = device_of(sum);
    DeviceBounded out = gpu::allocate_bounded(x->value.rows(), x->value.cols(), a.out, s_);
    gpu::normalize_rows(*x, *l, out, output_terms(a), s_);
    return resident_on_device(std::move(out));
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

  Bounded captured(const CapturedTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>* rows,
                   double scale, DType format) const override {
    const HeadLayout l = head_layout(t.dims, b, h);
    const std::int64_t count = rows ? static_cast<std::int64_t>(rows->size()) : l.rows;
    for (std::int64_t r = 0; rows && r < count; ++r) {
      if ((*rows)[static_cast<std::size_t>(r)] < 0 || (*rows)[static_cast<std::size_t>(r)] >= l.rows) {
        throw Error("gpu reference: captured row " + std::to_string((*rows)[static_cast<std::size_t>(r)]) +
                    " outside the head's " + std::to_string(l.rows));
      }
    }
    // A format not widened here: converted on the host.
    if (!gpu::widens(t.dtype)) return resident(HeadEvaluator::captured(t, b, h, rows, scale, format));
    DeviceBounded d;
    d.format = format;
    d.value = DeviceMatrix(count, l.cols, s_);
    const auto* head = static_cast<const unsigned char*>(t.host ? t.host->data() : t.device) +
                       static_cast<std::size_t>(l.offset) * dtype_size(t.dtype);
    // Each run of consecutive rows (a sample's rows spread over the head) in one widening.
    for (std::int64_t r = 0; r < count;) {
      const std::int64_t first = rows ? (*rows)[static_cast<std::size_t>(r)] : 0;
      std::int64_t run = rows ? 1 : count;
      while (r + run < count && (*rows)[static_cast<std::size_t>(r + run)] == first + run) ++run;
      gpu::widen(head + static_cast<std::size_t>(first * l.cols) * dtype_size(t.dtype),
                 t.host ? gpu::Memory::host : gpu::Memory::device, t.dtype, run * l.cols, scale, d.value.row(r), s_);
      r += run;
    }
    return resident_on_device(std::move(d));
  }

  Bounded to_host(const Bounded& b) const override { return b.on_device() ? gpu::download(*b.device, s_) : b; }
  Bounded resident(const Bounded& b) const override {
    Bounded r;
    r.format = b.format;
    r.device = device_of(b);
    return r;
  }
  Metrics compare(const HeadSpot& spot, const Bounded& kernel, const Bounded& reference, std::int64_t rows,
                  std::int64_t cols, DType kernel_format, BoundChoice judged_by) const override;

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

  ThreadContext& ctx_;
  cudaStream_t s_;
  const HeadInputs& in_;
  DeviceMatrix q_, k_, v_, bias_;
  mutable std::map<std::pair<const double*, double>, DeviceMatrix> nominal_;
  mutable DeviceMatrix v_squared_;
};

Bounded GpuHeadEvaluator::pv(const Bounded& p, std::int64_t key_begin, std::int64_t key_end, const Bounded* acc,
                             const Arithmetic& a) const {
  const std::int64_t keys = key_end - key_begin;
  if (p.cols() != keys) throw Error("reference: p and v disagree in key count");
  const std::int64_t rows = p.rows(), cols = v_.cols();
  const stage_math::PvTerms terms = pv_terms(a, p.format, keys);
  const DevicePtr device_p = device_of(p);
  const DeviceBounded& dp = *device_p;
  const DevicePtr device_acc = acc ? device_of(*acc) : nullptr;
  const double floor = nominal_floor(a);
  DeviceMatrix p_nominal(rows, keys, s_);
  gpu::nominal(dp.value, floor, p_nominal, s_);
  const DeviceMatrix& v_nominal = nominal(v_, floor);
  const DeviceMatrix& v_abs = nominal(v_, 0);

  // Block by block, as eval_pv: the value, sum nu|p| nu|v| (+|acc|) and the reach of every
  // prefix. Every block's two products at once (batched GEMMs), then one pass sums them in order.
  DeviceBounded out;
  out.format = a.out;
  out.value = acc ? gpu::copy_of(device_acc->value, s_) : gpu::zeros(rows, cols, s_);
  DeviceMatrix accumulated(rows, cols, s_), reach(rows, cols, s_);
  const std::int64_t blocks = (keys + kPrefixBlock - 1) / kPrefixBlock, whole = keys / kPrefixBlock;
  DeviceMatrix value_blocks(blocks * rows, cols, s_), nominal_blocks(blocks * rows, cols, s_);
  if (whole > 0 && rows > 0 && cols > 0) {
    gpu::gemm_batched(ctx_.cublas, gpu::cols_of(dp.value, 0, kPrefixBlock), kPrefixBlock,
                      gpu::rows_of(v_, key_begin, kPrefixBlock), kPrefixBlock * cols, whole, value_blocks.data());
    gpu::gemm_batched(ctx_.cublas, gpu::cols_of(p_nominal, 0, kPrefixBlock), kPrefixBlock,
                      gpu::rows_of(v_nominal, key_begin, kPrefixBlock), kPrefixBlock * cols, whole,
                      nominal_blocks.data());
  }
  if (whole < blocks && rows > 0 && cols > 0) {  // the last, narrower block, in its place
    const std::int64_t j = whole * kPrefixBlock, width = keys - j;
    gpu::gemm_batched(ctx_.cublas, gpu::cols_of(dp.value, j, width), 0, gpu::rows_of(v_, key_begin + j, width), 0, 1,
                      value_blocks.row(whole * rows));
    gpu::gemm_batched(ctx_.cublas, gpu::cols_of(p_nominal, j, width), 0, gpu::rows_of(v_nominal, key_begin + j, width),
                      0, 1, nominal_blocks.row(whole * rows));
  }
  gpu::prefix_scan(value_blocks.data(), nominal_blocks.data(), blocks, out.value, accumulated, reach, s_);

  const gpu::Operand v_rows_abs = gpu::rows_of(v_abs, key_begin, keys);
  // sum |p||v| (+|acc|) as it is (without the tensor cores' nominal sizes).
  DeviceMatrix magnitude;
  if (a.tensor_cores) {
    DeviceMatrix p_abs(rows, keys, s_);
    gpu::nominal(dp.value, 0, p_abs, s_);
    magnitude = DeviceMatrix(rows, cols, s_);
    gpu::gemm(ctx_.cublas, 1, gpu::whole(p_abs), v_rows_abs, 0, magnitude);
    if (acc) {
      DeviceMatrix acc_abs(rows, cols, s_);
      gpu::nominal(device_acc->value, 0, acc_abs, s_);
      gpu::add(magnitude, acc_abs, s_);
    }
  }
  // E(p) |v| of each bound (zero for an exact p) plus acc's.
  const auto propagated = [&](const DeviceMatrix& p_bound, const DeviceMatrix* acc_bound) {
    DeviceMatrix m = p_bound.size() > 0 ? DeviceMatrix(rows, cols, s_) : gpu::zeros(rows, cols, s_);
    if (p_bound.size() > 0) gpu::gemm(ctx_.cublas, 1, gpu::whole(p_bound), v_rows_abs, 0, m);
    if (acc_bound && acc_bound->size() > 0) gpu::add(m, *acc_bound, s_);
    return m;
  };
  const DeviceMatrix propagated_worst = propagated(dp.bound, acc ? &device_acc->bound : nullptr);
  const DeviceMatrix propagated_tight = propagated(dp.tight, acc ? &device_acc->tight : nullptr);
  // With operand rounding: sum p^2 v^2, and the value rows' per-column sums.
  const bool rounded = terms.u_operand > 0;
  DeviceMatrix squares, operand_floor = rounded ? DeviceMatrix(1, cols, s_) : gpu::zeros(1, cols, s_), v_norm;
  if (rounded) {
    DeviceMatrix p_squared(rows, keys, s_);
    gpu::square(dp.value, p_squared, s_);
    squares = DeviceMatrix(rows, cols, s_);
    gpu::gemm(ctx_.cublas, 1, gpu::whole(p_squared), gpu::rows_of(squared_values(), key_begin, keys), 0, squares);
    v_norm = DeviceMatrix(1, cols, s_);
    gpu::column_sums(v_, key_begin, keys, terms.eta_operand, operand_floor, v_norm, s_);
  }
  out.bound = DeviceMatrix(rows, cols, s_);
  out.tight = DeviceMatrix(rows, cols, s_);
  const gpu::PvInputs inputs{&out.value,
                             &accumulated,
                             &reach,
                             a.tensor_cores ? &magnitude : &accumulated,
                             &propagated_worst,
                             &propagated_tight,
                             rounded ? &squares : nullptr,
                             &operand_floor,
                             rounded ? &v_norm : nullptr};
  gpu::pv_elements(inputs, terms, out, s_);
  return resident_on_device(std::move(out));
}

Metrics GpuHeadEvaluator::compare(const HeadSpot& spot, const Bounded& kernel, const Bounded& reference,
                                  std::int64_t rows, std::int64_t cols, DType kernel_format,
                                  BoundChoice judged_by) const {
  const DevicePtr k = device_of(kernel), ref = device_of(reference);
  if (rows > std::min(k->value.rows(), ref->value.rows()) || cols > std::min(k->value.cols(), ref->value.cols())) {
    throw Error("compare: the compared extent is larger than the kernel tensor or the reference");
  }
  const gpu::DeviceComparison d = gpu::compare_on_device(k->value, *ref, rows, cols, kernel_format, s_);
  Metrics m;
  m.judged_by = judged_by;
  m.elements = rows * cols;
  m.nan_kernel = d.nan_kernel;
  m.posinf_kernel = d.posinf_kernel;
  m.neginf_kernel = d.neginf_kernel;
  m.masked_neg_inf = d.masked_neg_inf;
  m.nan_reference = d.nan_reference;
  m.inf_reference = d.inf_reference;
  m.max_abs_error = d.max_abs_error;
  m.max_rel_error = d.max_rel_error;
  m.max_normalized_error = d.max_normalized_error;
  m.over_bound = d.over_bound;
  m.over_tight = d.over_tight;
  m.max_ulp = d.max_ulp;
  const auto report = [&](const gpu::ReportedElement& e) {
    const std::int64_t r = e.index / cols, c = e.index % cols;
    return ElementReport{{spot.b, spot.h, spot.row_of(r), spot.per_row ? -1 : spot.col_offset + c},
                         e.kernel, e.reference, e.bound, e.tight};
  };
  if (d.first_over_tight.index >= 0) m.first_failure = report(d.first_over_tight);
  if (d.first_over_bound.index >= 0) m.first_worst_case_failure = report(d.first_over_bound);
  if (d.worst.index >= 0) {
    m.worst = report(d.worst);
    m.max_tight_error = d.worst_tight;
  }
  return m;
}

class GpuEvaluators final : public EvaluatorSource {
 public:
  GpuEvaluators() {
    std::string why;
    if (!cuda_device_available(&why)) throw Error("--reference gpu: " + why);
  }
  // Each thread's pool keeps what is freed while the evaluators run (blocks allocate the same
  // sizes again and again) and gives it all back here, for the kernels judged next.
  ~GpuEvaluators() override { contexts_.clear(); }

  std::unique_ptr<HeadEvaluator> for_head(const HeadInputs& in) const override {
    return std::make_unique<GpuHeadEvaluator>(context(), in);
  }
  const char* device() const override { return "gpu"; }
  int concurrency() const override { return kConcurrentHeads; }
  std::int64_t block_elements() const override { return kDeviceBlockElements; }

 private:
  ThreadContext& context() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<ThreadContext>& c = contexts_[std::this_thread::get_id()];
    if (!c) c = std::make_unique<ThreadContext>();
    c->pool.use();
    return *c;
  }

  mutable std::mutex mutex_;
  mutable std::map<std::thread::id, std::unique_ptr<ThreadContext>> contexts_;
};

}  // namespace

std::unique_ptr<EvaluatorSource> gpu_evaluators() { return std::make_unique<GpuEvaluators>(); }

std::size_t gpu_reference_working_bytes() {
  return static_cast<std::size_t>(kConcurrentHeads * kDeviceBlockElements * kTensorsPerBlock) * sizeof(double);
}

}  // namespace fc

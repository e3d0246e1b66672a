#include "reference/gpu/gpu_evaluator.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/check.h"
#include "reference/attention.h"
#include "reference/gpu/chain_kernels.h"
#include "reference/gpu/compare_kernel.h"
#include "reference/gpu/device_matrix.h"
#include "reference/gpu/stage_kernels.h"
#include "reference/gpu/thread_pool.h"
#include "reference/gpu/tile_stack.h"
#include "reference/gpu/transfer.h"
#include "reference/stage_terms.h"
#include "stages/device_memory.h"

namespace fc {
namespace {

using gpu::DeviceBounded;
using gpu::DeviceMatrix;
using gpu::DevicePtr;
using gpu::follows;
using gpu::resident_on_device;

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
// FP64 tensors of a block's size one evaluator holds at most. A blocked chain keeps every
// tile at once, end to end and stage-local, each with both bounds: scores and p~ (6), the
// accumulator before and after each tile's P.V (12 at D 64 with 64-key tiles, twice that at D
// 128), the captures widened (4), and P.V's GEMM products and temporaries while they are
// formed (about 7).
constexpr std::int64_t kTensorsPerBlock = 48;

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

// The Metrics of a comparison made on the device.
Metrics metrics_of(const HeadSpot& spot, const gpu::DeviceComparison& d, std::int64_t rows, std::int64_t cols,
                   BoundChoice judged_by) {
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

struct ThreadContext {
  gpu::OwnPool pool;  // destroyed last, after the stream's work is done
  CudaStream stream;
  gpu::CublasHandle cublas{stream.get()};
  // K and V of the last head evaluated here, by HeadInputs::kv_id (0: none kept): the
  // evaluators of one head's blocks of rows upload them once.
  std::uint64_t kv_id = 0;
  std::shared_ptr<const DeviceMatrix> k, v;
  ~ThreadContext() { cudaStreamSynchronize(stream.get()); }

  // in's K and V on the device: the ones kept when in shares their id, else uploaded (and
  // kept, when it has one).
  std::pair<std::shared_ptr<const DeviceMatrix>, std::shared_ptr<const DeviceMatrix>> kv_of(const HeadInputs& in) {
    if (in.kv_id != 0 && in.kv_id == kv_id) return {k, v};
    auto uploaded = std::make_pair(std::make_shared<const DeviceMatrix>(gpu::upload(in.k, stream.get())),
                                   std::make_shared<const DeviceMatrix>(gpu::upload(in.v, stream.get())));
    kv_id = in.kv_id;
    k = in.kv_id != 0 ? uploaded.first : nullptr;
    v = in.kv_id != 0 ? uploaded.second : nullptr;
    return uploaded;
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
  void widen_into(const CapturedTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>* rows,
                  double scale, double* out) const;

  ThreadContext& ctx_;
  cudaStream_t s_;
  const HeadInputs& in_;
  std::pair<std::shared_ptr<const DeviceMatrix>, std::shared_ptr<const DeviceMatrix>> kv_;  // k_ and v_ live here
  DeviceMatrix q_;
  const DeviceMatrix &k_, &v_;
  DeviceMatrix bias_;
  mutable std::map<std::pair<const double*, double>, DeviceMatrix> nominal_;
  mutable DeviceMatrix v_squared_;
};

// Scores of `tiles` tiles of `width` keys from col_begin, one after another (one tile: the
// columns [col_begin, col_begin + width)).
DevicePtr GpuHeadEvaluator::qk_stack(std::int64_t col_begin, std::int64_t tiles, std::int64_t width,
                                     const Arithmetic& a) const {
  const std::int64_t rows = q_.rows(), stacked = tiles * rows;
  DeviceMatrix t(stacked, width, s_), magnitude(stacked, width, s_);
  const double floor = nominal_floor(a);
  const DeviceMatrix &q_nominal = nominal(q_, floor), &k_nominal = nominal(k_, floor);
  if (tiles == 1) {
    gpu::gemm(ctx_.cublas, in_.scale, gpu::whole(q_), gpu::transposed(gpu::rows_of(k_, col_begin, width)), 0, t);
    gpu::gemm(ctx_.cublas, in_.scale, gpu::whole(q_nominal), gpu::transposed(gpu::rows_of(k_nominal, col_begin, width)),
              0, magnitude);
  } else if (stacked > 0 && width > 0) {
    // Tile i: q against the key rows width i further on, into the stack's tile i.
    const std::int64_t key_stride = width * k_.cols();
    gpu::gemm_batched(ctx_.cublas, in_.scale, gpu::whole(q_), 0, gpu::transposed(gpu::rows_of(k_, col_begin, width)),
                      key_stride, tiles, t.data(), rows * width);
    gpu::gemm_batched(ctx_.cublas, in_.scale, gpu::whole(q_nominal), 0,
                      gpu::transposed(gpu::rows_of(k_nominal, col_begin, width)), key_stride, tiles, magnitude.data(),
                      rows * width);
  }
  DeviceBounded out = gpu::allocate_bounded(stacked, width, a.out, s_);
  gpu::qk_elements(t, magnitude, bias_, col_begin, {tiles, rows, width},
                   qk_terms(a, in_.q.cols(), in_.scale, in_.softcap), out, s_);
  return std::make_shared<const DeviceBounded>(std::move(out));
}

// P.V's products for a stack of `tiles` tiles of p, tile i against the value rows of keys
// [key_begin + i w, + w), w p's width. As eval_pv, block by block of 64 keys: each block's
// value and sum nu|p| nu|v|, for the reach of every prefix.
std::unique_ptr<PvWork> GpuHeadEvaluator::pv_products(const DeviceBounded& p, std::int64_t tiles,
                                                      std::int64_t key_begin, const Arithmetic& a) const {
  const std::int64_t stacked = p.value.rows(), width = p.value.cols(), cols = v_.cols();
  const std::int64_t rows = tiles > 0 ? stacked / tiles : 0;
  if (key_begin < 0 || key_begin + tiles * width > v_.rows()) throw Error("reference: p and v disagree in key count");
  auto w = std::make_unique<PvWork>();
  w->terms = pv_terms(a, p.format, width);
  w->rows_per_tile = rows;
  w->tensor_cores = a.tensor_cores;
  w->rounded = w->terms.u_operand > 0;
  const double floor = nominal_floor(a);
  DeviceMatrix p_nominal(stacked, width, s_);
  gpu::nominal(p.value, floor, p_nominal, s_);
  const DeviceMatrix &v_nominal = nominal(v_, floor), &v_abs = nominal(v_, 0);
  const bool any = stacked > 0 && cols > 0 && width > 0;

  const std::int64_t whole = width / kPrefixBlock;
  w->blocks = (width + kPrefixBlock - 1) / kPrefixBlock;
  w->value_blocks = DeviceMatrix(w->blocks * stacked, cols, s_);
  w->nominal_blocks = DeviceMatrix(w->blocks * stacked, cols, s_);
  // Block k of tile i: its 64 keys' columns of p against their value rows, into block k's
  // matrix at the tile's rows. Batched over the blocks of one tile, or over the tiles.
  const auto block_products = [&](const DeviceMatrix& left, const DeviceMatrix& right, DeviceMatrix& into) {
    if (!any) return;
    const auto left_cols = [&](std::int64_t j, std::int64_t n) { return gpu::Operand{left.data() + j, rows, n, width}; };
    if (tiles == 1) {
      if (whole > 0) {
        gpu::gemm_batched(ctx_.cublas, 1, left_cols(0, kPrefixBlock), kPrefixBlock,
                          gpu::rows_of(right, key_begin, kPrefixBlock), kPrefixBlock * cols, whole, into.data(),
                          rows * cols);
      }
      if (whole < w->blocks) {  // the last, narrower block, in its place
        const std::int64_t j = whole * kPrefixBlock;
        gpu::gemm_batched(ctx_.cublas, 1, left_cols(j, width - j), 0, gpu::rows_of(right, key_begin + j, width - j), 0,
                          1, into.row(whole * rows), rows * cols);
      }
      return;
    }
    for (std::int64_t k = 0; k < w->blocks; ++k) {
      const std::int64_t j = k * kPrefixBlock, n = std::min(kPrefixBlock, width - j);
      gpu::gemm_batched(ctx_.cublas, 1, left_cols(j, n), rows * width, gpu::rows_of(right, key_begin + j, n),
                        width * cols, tiles, into.row(k * stacked), rows * cols);
    }
  };
  block_products(p.value, v_, w->value_blocks);
  block_products(p_nominal, v_nominal, w->nominal_blocks);

  // Each tile's p-like matrix against all its keys' value rows.
  const auto tile_products = [&](const DeviceMatrix& left, const DeviceMatrix& right, DeviceMatrix& into) {
    if (!any) {
      into = gpu::zeros(stacked, cols, s_);
      return;
    }
    into = DeviceMatrix(stacked, cols, s_);
    gpu::gemm_batched(ctx_.cublas, 1, gpu::Operand{left.data(), rows, width, width}, rows * width,
                      gpu::rows_of(right, key_begin, width), width * cols, tiles, into.data(), rows * cols);
  };
  // sum |p||v| as it is (without the tensor cores' nominal sizes).
  if (a.tensor_cores) {
    DeviceMatrix p_abs(stacked, width, s_);
    gpu::nominal(p.value, 0, p_abs, s_);
    tile_products(p_abs, v_abs, w->magnitude);
  }
  // E(p) |v| of each bound (none for an exact p).
  if (p.bound.size() > 0) {
    tile_products(p.bound, v_abs, w->worst);
    tile_products(p.tight, v_abs, w->tight);
  }
  // With operand rounding: sum p^2 v^2, and the value rows' per-column sums of each tile.
  w->operand_floor = w->rounded ? DeviceMatrix(tiles, cols, s_) : gpu::zeros(tiles, cols, s_);
  if (w->rounded) {
    DeviceMatrix p_squared(stacked, width, s_);
    gpu::square(p.value, p_squared, s_);
    tile_products(p_squared, squared_values(), w->squares);
    w->v_norm = DeviceMatrix(tiles, cols, s_);
    gpu::column_sums(v_, key_begin, width, tiles, width, w->terms.eta_operand, w->operand_floor, w->v_norm, s_);
  }
  return w;
}

std::vector<OnlineSoftmaxResult> GpuHeadEvaluator::online_softmax_each(const std::vector<OnlineSoftmaxItem>& items,
                                                                       const Arithmetic& a) const {
  std::vector<DevicePtr> s, m, l;
  for (const OnlineSoftmaxItem& i : items) {
    require_rows(*i.scores, *i.prev_max, "online softmax");
    require_rows(*i.scores, *i.prev_sum, "online softmax");
    s.push_back(device_of(*i.scores));
    m.push_back(device_of(*i.prev_max));
    l.push_back(device_of(*i.prev_sum));
  }
  std::vector<OnlineSoftmaxResult> out;
  for (const auto& [first, count] : gpu::runs_following({&s, &m, &l})) {
    const DevicePtr scores = gpu::stack_view(s, first, count);
    const std::int64_t rows = scores->value.rows(), n = static_cast<std::int64_t>(count);
    DeviceBounded p = gpu::allocate_bounded(rows, scores->value.cols(), a.out, s_);
    DeviceBounded max = gpu::allocate_bounded(rows, 1, DType::f32, s_);
    DeviceBounded sum = gpu::allocate_bounded(rows, 1, DType::f32, s_);
    DeviceBounded rescale = gpu::allocate_bounded(rows, 1, DType::f32, s_);
    gpu::online_softmax_rows(*scores, *gpu::stack_view(m, first, count), *gpu::stack_view(l, first, count), p, max,
                             sum, rescale, output_terms(a), s_);
    const DevicePtr ps = std::make_shared<const DeviceBounded>(std::move(p));
    const DevicePtr maxes = std::make_shared<const DeviceBounded>(std::move(max));
    const DevicePtr sums = std::make_shared<const DeviceBounded>(std::move(sum));
    const DevicePtr factors = std::make_shared<const DeviceBounded>(std::move(rescale));
    for (std::int64_t t = 0; t < n; ++t) {
      out.push_back({resident_on_device(gpu::tile_of(ps, n, t)), resident_on_device(gpu::tile_of(maxes, n, t)),
                     resident_on_device(gpu::tile_of(sums, n, t)), resident_on_device(gpu::tile_of(factors, n, t))});
    }
  }
  return out;
}

std::vector<Bounded> GpuHeadEvaluator::rescale_each(const std::vector<RescaleItem>& items, const Arithmetic& a) const {
  std::vector<DevicePtr> x, mp, mn;
  for (const RescaleItem& i : items) {
    require_rows(*i.acc, *i.prev_max, "rescale");
    require_rows(*i.acc, *i.new_max, "rescale");
    x.push_back(device_of(*i.acc));
    mp.push_back(device_of(*i.prev_max));
    mn.push_back(device_of(*i.new_max));
  }
  std::vector<Bounded> out;
  for (const auto& [first, count] : gpu::runs_following({&x, &mp, &mn})) {
    const DevicePtr acc = gpu::stack_view(x, first, count);
    DeviceBounded r = gpu::allocate_bounded(acc->value.rows(), acc->value.cols(), a.out, s_);
    gpu::rescale_rows(*acc, *gpu::stack_view(mp, first, count), *gpu::stack_view(mn, first, count), r,
                      output_terms(a), s_);
    for (Bounded& t : gpu::tiles_of(std::make_shared<const DeviceBounded>(std::move(r)), static_cast<std::int64_t>(count))) {
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<Bounded> GpuHeadEvaluator::pv_each(const std::vector<PvItem>& items, const Arithmetic& a) const {
  std::vector<DevicePtr> p, acc;
  for (const PvItem& i : items) {
    if (i.p->cols() != i.key_end - i.key_begin) throw Error("reference: p and v disagree in key count");
    if (i.acc && i.acc->rows() != i.p->rows()) throw Error("reference: row count mismatch in pv");
    p.push_back(device_of(*i.p));
    acc.push_back(i.acc ? device_of(*i.acc) : nullptr);
  }
  std::vector<Bounded> out;
  // A run's tiles take consecutive keys, and all or none of them an accumulator.
  const auto joins = [&](std::size_t i) {
    return follows(*p[i - 1], *p[i]) && items[i].key_begin == items[i - 1].key_end &&
           (acc[i] ? acc[i - 1] && follows(*acc[i - 1], *acc[i]) : !acc[i - 1]);
  };
  for (const auto& [first, count] : gpu::runs_of(items.size(), joins)) {
    const std::int64_t n = static_cast<std::int64_t>(count);
    const DevicePtr ps = gpu::stack_view(p, first, count);
    const DevicePtr accs = acc[first] ? gpu::stack_view(acc, first, count) : nullptr;
    const std::unique_ptr<PvWork> work = pv_products(*ps, n, items[first].key_begin, a);
    DeviceBounded r = gpu::allocate_bounded(ps->value.rows(), v_.cols(), a.out, s_);
    gpu::pv_finish(work->products(), accs.get(), work->terms, r, s_);
    for (Bounded& t : gpu::tiles_of(std::make_shared<const DeviceBounded>(std::move(r)), n)) out.push_back(std::move(t));
  }
  return out;
}

std::int64_t GpuHeadEvaluator::whole_tiles(std::int64_t col_begin, std::int64_t col_end, std::int64_t tile_width,
                                           const ChainArithmetic& a, std::vector<TileReference>& tiles) const {
  const std::int64_t rows = q_.rows(), n = col_end > col_begin ? (col_end - col_begin) / tile_width : 0;
  if (n < 2 || rows == 0 || v_.cols() == 0) return 0;  // tile by tile
  const std::int64_t stacked = n * rows;
  const DevicePtr scores = qk_stack(col_begin, n, tile_width, a.qk);
  DeviceBounded p = gpu::allocate_bounded(stacked, tile_width, a.softmax.out, s_);
  DeviceBounded max = gpu::allocate_bounded(stacked, 1, DType::f32, s_);
  DeviceBounded sum = gpu::allocate_bounded(stacked, 1, DType::f32, s_);
  DeviceBounded factor = gpu::allocate_bounded(stacked, 1, DType::f32, s_);
  gpu::online_softmax_tiles(*scores, n, p, max, sum, factor, output_terms(a.softmax), s_);
  const std::unique_ptr<PvWork> work = pv_products(p, n, col_begin, a.pv);
  DeviceBounded rescaled = gpu::allocate_bounded(stacked, v_.cols(), a.rescale.out, s_);
  DeviceBounded acc = gpu::allocate_bounded(stacked, v_.cols(), a.pv.out, s_);
  gpu::accumulate_tiles(work->products(), max, rescaled, acc, output_terms(a.rescale), work->terms, s_);

  const auto split = [&](DeviceBounded& d) {
    return gpu::tiles_of(std::make_shared<const DeviceBounded>(std::move(d)), n);
  };
  std::vector<Bounded> score_tiles = gpu::tiles_of(scores, n), p_tiles = split(p), max_tiles = split(max),
                       sum_tiles = split(sum), factor_tiles = split(factor),
                       rescaled_tiles = split(rescaled), acc_tiles = split(acc);
  for (std::int64_t t = 0; t < n; ++t) {
    const std::size_t i = static_cast<std::size_t>(t);
    TileReference r;
    r.col_begin = col_begin + t * tile_width;
    r.col_end = r.col_begin + tile_width;
    r.scores = std::move(score_tiles[i]);
    r.softmax = {std::move(p_tiles[i]), std::move(max_tiles[i]), std::move(sum_tiles[i]), std::move(factor_tiles[i])};
    r.rescaled = std::move(rescaled_tiles[i]);
    r.acc = std::move(acc_tiles[i]);
    tiles.push_back(std::move(r));
  }
  return n;
}

// Rows `rows` (all when null) of head (b, h) of t, widened to FP64 into `out` (their rows x
// the head's columns).
void GpuHeadEvaluator::widen_into(const CapturedTensor& t, std::int64_t b, std::int64_t h,
                                  const std::vector<std::int64_t>* rows, double scale, double* out) const {
  const HeadLayout l = head_layout(t.dims, b, h);
  const std::int64_t count = rows ? static_cast<std::int64_t>(rows->size()) : l.rows;
  const auto* head = static_cast<const unsigned char*>(t.host ? t.host->data() : t.device) +
                     static_cast<std::size_t>(l.offset) * dtype_size(t.dtype);
  // Each run of consecutive rows (a sample's rows spread over the head) in one widening.
  for (std::int64_t r = 0; r < count;) {
    const std::int64_t first = rows ? (*rows)[static_cast<std::size_t>(r)] : 0;
    std::int64_t run = rows ? 1 : count;
    while (r + run < count && (*rows)[static_cast<std::size_t>(r + run)] == first + run) ++run;
    gpu::widen(head + static_cast<std::size_t>(first * l.cols) * dtype_size(t.dtype),
               t.host ? gpu::Memory::host : gpu::Memory::device, t.dtype, run * l.cols, scale, out + r * l.cols, s_);
    r += run;
  }
}

std::vector<Bounded> GpuHeadEvaluator::captured_each(const std::vector<CapturedTensor>& tensors, std::int64_t b,
                                                     std::int64_t h, const std::vector<std::int64_t>* rows,
                                                     double scale, DType format) const {
  if (tensors.empty()) return {};
  bool stackable = true;
  for (const CapturedTensor& t : tensors) stackable = stackable && gpu::widens(t.dtype) && t.dims == tensors[0].dims;
  // A format not widened here: converted on the host.
  if (!stackable) return HeadEvaluator::captured_each(tensors, b, h, rows, scale, format);
  const HeadLayout l = head_layout(tensors[0].dims, b, h);
  const std::int64_t count = rows ? static_cast<std::int64_t>(rows->size()) : l.rows;
  for (std::int64_t r = 0; rows && r < count; ++r) {
    if ((*rows)[static_cast<std::size_t>(r)] < 0 || (*rows)[static_cast<std::size_t>(r)] >= l.rows) {
      throw Error("gpu reference: captured row " + std::to_string((*rows)[static_cast<std::size_t>(r)]) +
                  " outside the head's " + std::to_string(l.rows));
    }
  }
  const std::int64_t n = static_cast<std::int64_t>(tensors.size());
  DeviceBounded stack;
  stack.format = format;
  stack.value = DeviceMatrix(n * count, l.cols, s_);
  // Several tensors kept on the device, whole heads or a block of consecutive rows: one
  // widening of all (its table of sources costs a synchronization).
  const std::optional<std::int64_t> first = rows ? first_of_consecutive(*rows) : std::optional<std::int64_t>(0);
  bool on_device = first.has_value() && n > 1;
  for (const CapturedTensor& t : tensors) on_device = on_device && !t.host;
  if (on_device) {
    std::vector<const void*> heads;
    for (const CapturedTensor& t : tensors) {
      heads.push_back(static_cast<const unsigned char*>(t.device) + static_cast<std::size_t>(l.offset) * dtype_size(t.dtype));
    }
    gpu::widen_rows_each(heads, tensors[0].dtype, *first, count, l.cols, scale, stack.value.data(), s_);
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      widen_into(tensors[static_cast<std::size_t>(i)], b, h, rows, scale, stack.value.row(i * count));
    }
  }
  return gpu::tiles_of(std::make_shared<const DeviceBounded>(std::move(stack)), n);
}

std::vector<Metrics> GpuHeadEvaluator::compare_each(const std::vector<CompareItem>& items,
                                                    BoundChoice judged_by) const {
  std::vector<DevicePtr> kernels, references;
  for (const CompareItem& i : items) {
    kernels.push_back(device_of(*i.kernel));
    references.push_back(device_of(*i.reference));
    const DeviceBounded &k = *kernels.back(), &ref = *references.back();
    if (i.rows > std::min(k.value.rows(), ref.value.rows()) || i.cols > std::min(k.value.cols(), ref.value.cols())) {
      throw Error("compare: the compared extent is larger than the kernel tensor or the reference");
    }
  }
  // Chains of items whose kernel tensors and references each follow the previous one's in
  // memory, whatever order the items come in (a block's outputs interleave the quantities tile
  // by tile): each chain one segmented comparison.
  std::vector<std::vector<std::size_t>> chains;
  std::map<std::pair<const double*, const double*>, std::size_t> next_of;  // where a chain's next item starts
  for (std::size_t i = 0; i < items.size(); ++i) {
    const DeviceBounded &k = *kernels[i], &ref = *references[i];
    const auto it = next_of.find({k.value.data(), ref.value.data()});
    bool joined = false;
    if (it != next_of.end()) {
      const std::size_t last = chains[it->second].back();
      const CompareItem &a = items[last], &b = items[i];
      joined = a.rows == b.rows && a.cols == b.cols && a.kernel_format == b.kernel_format &&
               follows(*kernels[last], k) && follows(*references[last], ref);
    }
    const std::size_t chain = joined ? it->second : chains.size();
    if (joined) {
      next_of.erase(it);
      chains[chain].push_back(i);
    } else {
      chains.push_back({i});
    }
    if (k.value.size() > 0 && ref.value.size() > 0) {
      next_of[{k.value.data() + k.value.size(), ref.value.data() + ref.value.size()}] = chain;
    }
  }
  // Every chain compared on the device into its own stretch of the results, then one
  // read-back of all of them.
  std::vector<gpu::DeviceComparison> found(items.size());
  auto* results = static_cast<gpu::DeviceComparison*>(gpu::allocate_async(items.size() * sizeof found[0], s_));
  try {
    std::vector<std::size_t> order;  // item of each result
    for (const std::vector<std::size_t>& chain : chains) {
      const CompareItem& head = items[chain[0]];
      const std::size_t at = order.size();
      order.insert(order.end(), chain.begin(), chain.end());
      if (head.rows * head.cols == 0) continue;  // nothing compared: as found (none)
      std::vector<DevicePtr> k, ref;
      for (std::size_t i : chain) {
        k.push_back(kernels[i]);
        ref.push_back(references[i]);
      }
      gpu::compare_segments(gpu::stack_view(k, 0, chain.size())->value, *gpu::stack_view(ref, 0, chain.size()),
                            static_cast<std::int64_t>(chain.size()), head.rows, head.cols, head.kernel_format,
                            results + at, s_);
    }
    std::vector<gpu::DeviceComparison> read(items.size());
    FC_CUDA(cudaMemcpyAsync(read.data(), results, items.size() * sizeof read[0], cudaMemcpyDeviceToHost, s_));
    FC_CUDA(cudaStreamSynchronize(s_));
    for (std::size_t j = 0; j < order.size(); ++j) {
      const CompareItem& item = items[order[j]];
      if (item.rows * item.cols > 0) found[order[j]] = read[j];
    }
  } catch (...) {
    cudaFreeAsync(results, s_);
    throw;
  }
  FC_CUDA(cudaFreeAsync(results, s_));
  std::vector<Metrics> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out.push_back(metrics_of(items[i].spot, found[i], items[i].rows, items[i].cols, judged_by));
  }
  return out;
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

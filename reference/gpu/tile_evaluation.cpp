// The GPU evaluator's tiles evaluated as stacks (tile_stack.h): the scores of many tiles in
// one batched DGEMM pair, P.V's products of every tile of a stack, the stage-local functions
// over each run of tiles that follow one another in memory, and the blocked chain's whole
// tiles at once (its two recurrences in chain_kernels.h).
#include "reference/gpu/head_evaluator.h"

namespace fc::gpu {

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
    std::vector<Bounded> ps = gpu::tiles_of(std::move(p), n), maxes = gpu::tiles_of(std::move(max), n),
                         sums = gpu::tiles_of(std::move(sum), n), factors = gpu::tiles_of(std::move(rescale), n);
    for (std::size_t t = 0; t < count; ++t) {
      out.push_back({std::move(ps[t]), std::move(maxes[t]), std::move(sums[t]), std::move(factors[t])});
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
    for (Bounded& t : gpu::tiles_of(std::move(r), static_cast<std::int64_t>(count))) {
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
    for (Bounded& t : gpu::tiles_of(std::move(r), n)) out.push_back(std::move(t));
  }
  return out;
}

std::int64_t GpuHeadEvaluator::whole_tiles(std::int64_t col_begin, std::int64_t col_end, std::int64_t tile_width,
                                           const ChainArithmetic& a, std::vector<TileReference>& tiles) const {
  const std::int64_t rows = q_.rows(), n = col_end > col_begin ? (col_end - col_begin) / tile_width : 0;
  if (n < 2 || rows == 0 || v_.cols() == 0) return 0;  // tile by tile
  const std::int64_t stacked = n * rows;
  StepTimer timer = step("end-to-end references / whole tiles: scores");
  const DevicePtr scores = qk_stack(col_begin, n, tile_width, a.qk);
  timer.next("end-to-end references / whole tiles: online softmax");
  DeviceBounded p = gpu::allocate_bounded(stacked, tile_width, a.softmax.out, s_);
  DeviceBounded max = gpu::allocate_bounded(stacked, 1, DType::f32, s_);
  DeviceBounded sum = gpu::allocate_bounded(stacked, 1, DType::f32, s_);
  DeviceBounded factor = gpu::allocate_bounded(stacked, 1, DType::f32, s_);
  gpu::online_softmax_tiles(*scores, n, p, max, sum, factor, output_terms(a.softmax), s_);
  timer.next("end-to-end references / whole tiles: P.V products");
  const std::unique_ptr<PvWork> work = pv_products(p, n, col_begin, a.pv);
  timer.next("end-to-end references / whole tiles: rescale and accumulate");
  DeviceBounded rescaled = gpu::allocate_bounded(stacked, v_.cols(), a.rescale.out, s_);
  DeviceBounded acc = gpu::allocate_bounded(stacked, v_.cols(), a.pv.out, s_);
  gpu::accumulate_tiles(work->products(), max, rescaled, acc, output_terms(a.rescale), work->terms, s_);
  timer.next("end-to-end references / whole tiles: views of the tiles");

  std::vector<Bounded> score_tiles = gpu::tiles_of(scores, n), p_tiles = gpu::tiles_of(std::move(p), n),
                       max_tiles = gpu::tiles_of(std::move(max), n), sum_tiles = gpu::tiles_of(std::move(sum), n),
                       factor_tiles = gpu::tiles_of(std::move(factor), n),
                       rescaled_tiles = gpu::tiles_of(std::move(rescaled), n), acc_tiles = gpu::tiles_of(std::move(acc), n);
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

}  // namespace fc::gpu

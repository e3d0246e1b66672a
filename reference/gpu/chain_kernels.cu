#include "reference/gpu/chain_kernels.h"

#include "core/check.h"
#include "reference/gpu/row_teams.cuh"

namespace fc::gpu {
namespace {

struct Products {
  const double *value_blocks, *nominal_blocks, *magnitude, *worst, *tight, *squares, *operand_floor, *v_norm;
  std::int64_t blocks, n, cols, rows_per_tile;
};

const double* data_of(const DeviceMatrix* m) { return m ? m->data() : nullptr; }

Products products_of(const PvProducts& x, std::int64_t n, std::int64_t cols) {
  return {x.value_blocks->data(), x.nominal_blocks->data(), data_of(x.magnitude), data_of(x.propagated_worst),
          data_of(x.propagated_tight), data_of(x.squares), x.operand_floor->data(), data_of(x.v_norm),
          x.blocks, n, cols, x.rows_per_tile};
}

// Element i of acc + p v: the blocks of keys summed in order from acc, tracking the
// accumulated nominal sizes and the reach of every prefix, then pv_element's bounds.
__device__ void pv_element_at(const Products& x, std::int64_t i, double acc, double acc_worst, double acc_tight,
                              const stage_math::PvTerms& terms, double* value, double* bound, double* tight) {
  double v = acc, sum = fabs(v), top = sum;
  for (std::int64_t j = 0; j < x.blocks; ++j) {
    const double nominal = x.nominal_blocks[j * x.n + i];
    top = stage_math::larger(top, fabs(v) + nominal);
    sum += nominal;
    v += x.value_blocks[j * x.n + i];
  }
  const std::int64_t c = i % x.cols, tile = i / x.cols / x.rows_per_tile;
  const stage_math::PvElement e{v,
                                sum,
                                stage_math::larger(top, fabs(v)),
                                x.magnitude ? x.magnitude[i] + fabs(acc) : sum,
                                {(x.worst ? x.worst[i] : 0.0) + acc_worst, (x.tight ? x.tight[i] : 0.0) + acc_tight},
                                x.squares ? x.squares[i] : 0.0,
                                x.operand_floor[tile * x.cols + c],
                                x.v_norm ? x.v_norm[tile * x.cols + c] : 0.0};
  *value = v;
  stage_math::pv_element(e, terms, bound, tight);
}

__global__ void pv_finish_kernel(Products x, BoundedIn acc, stage_math::PvTerms terms, BoundedOut o) {
  FC_GRID_STRIDE(i, x.n) {
    const double a = acc.value ? acc.value[i] : 0.0;
    const double worst = acc.bound ? acc.bound[i] : 0.0, tight = acc.bound ? acc.tight[i] : 0.0;
    pv_element_at(x, i, a, worst, tight, terms, o.value + i, o.bound + i, o.tight + i);
  }
}

template <class TeamKind>
__global__ void online_softmax_tiles_kernel(BoundedIn s, std::int64_t tiles, std::int64_t rows, BoundedOut p,
                                            BoundedOut max, BoundedOut sum, BoundedOut rescale,
                                            stage_math::OutputTerms terms) {
  const std::int64_t r = RowTeam<TeamKind>::row(rows);
  if (r < 0) return;
  const auto team = RowTeam<TeamKind>::team();
  const double initial_max = -stage_math::infinity(), initial_sum = 0;
  RowIn prev_max{&initial_max, {nullptr, nullptr}}, prev_sum{&initial_sum, {nullptr, nullptr}};
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t row = t * rows + r;
    stage_math::online_softmax_row(team, s.cols, s.row(row), prev_max, prev_sum, p.row(row), max.row(row),
                                   sum.row(row), rescale.row(row), terms);
    team.sync();
    prev_max = max.in_row(row);
    prev_sum = sum.in_row(row);
  }
}

__global__ void accumulate_tiles_kernel(Products x, BoundedIn max, std::int64_t tiles, std::int64_t rows,
                                        const double* zeros, BoundedOut rescaled, BoundedOut acc,
                                        stage_math::OutputTerms rescale_terms, stage_math::PvTerms pv_terms) {
  const std::int64_t r = warp_row(rows);
  if (r < 0) return;
  const WarpTeam team{static_cast<int>(threadIdx.x % 32)};
  const double initial_max = -stage_math::infinity();
  RowIn prev_acc{zeros, {nullptr, nullptr}}, prev_max{&initial_max, {nullptr, nullptr}};
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t row = t * rows + r;
    stage_math::rescale_row(team, x.cols, prev_acc, prev_max, max.row(row), rescaled.row(row), rescale_terms);
    team.sync();
    for (std::int64_t c = team.rank(); c < x.cols; c += team.size()) {
      const std::int64_t i = row * x.cols + c;
      pv_element_at(x, i, rescaled.value[i], rescaled.bound[i], rescaled.tight[i], pv_terms, acc.value + i,
                    acc.bound + i, acc.tight + i);
    }
    team.sync();
    prev_acc = acc.in_row(row);
    prev_max = max.row(row);
  }
}

}  // namespace

void pv_finish(const PvProducts& x, const DeviceBounded* acc, const stage_math::PvTerms& terms, DeviceBounded& o,
               cudaStream_t stream) {
  const std::int64_t n = o.value.size();
  if (n == 0) return;
  if (acc && acc->value.size() != n) throw Error("gpu reference: P.V's accumulator is not the output's size");
  const BoundedIn a = acc ? in(*acc) : BoundedIn{nullptr, nullptr, nullptr, 0};
  pv_finish_kernel<<<element_blocks(n), kThreads, 0, stream>>>(products_of(x, n, o.value.cols()), a, terms, out(o));
  FC_CUDA_LAUNCH();
}

void online_softmax_tiles(const DeviceBounded& scores, std::int64_t tiles, DeviceBounded& p, DeviceBounded& max,
                          DeviceBounded& sum, DeviceBounded& rescale, const stage_math::OutputTerms& terms,
                          cudaStream_t stream) {
  if (tiles == 0 || scores.value.rows() == 0) return;
  const std::int64_t rows = scores.value.rows() / tiles;
  if (scores.value.cols() >= kBlockRowCols) {
    online_softmax_tiles_kernel<BlockTeam><<<RowTeam<BlockTeam>::blocks(rows), kThreads, 0, stream>>>(
        in(scores), tiles, rows, out(p), out(max), out(sum), out(rescale), terms);
  } else {
    online_softmax_tiles_kernel<WarpTeam><<<RowTeam<WarpTeam>::blocks(rows), kThreads, 0, stream>>>(
        in(scores), tiles, rows, out(p), out(max), out(sum), out(rescale), terms);
  }
  FC_CUDA_LAUNCH();
}

void accumulate_tiles(const PvProducts& x, const DeviceBounded& max, DeviceBounded& rescaled, DeviceBounded& acc,
                      const stage_math::OutputTerms& rescale_terms, const stage_math::PvTerms& pv_terms,
                      cudaStream_t stream) {
  const std::int64_t n = acc.value.size(), rows = x.rows_per_tile;
  if (n == 0 || rows == 0) return;
  const std::int64_t tiles = acc.value.rows() / rows;
  const DeviceMatrix zeros = gpu::zeros(1, acc.value.cols(), stream);  // the accumulator before the first tile
  accumulate_tiles_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(products_of(x, n, acc.value.cols()), in(max),
                                                                     tiles, rows, zeros.data(), out(rescaled),
                                                                     out(acc), rescale_terms, pv_terms);
  FC_CUDA_LAUNCH();
}

}  // namespace fc::gpu

#include "reference/gpu/chain_kernels.h"

#include <type_traits>

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

// The online softmax of a stack of tiles in the phases of stage_math.h: each tile's own work a
// team an item (tile t of row r is item t * rows + r), over every tile at once; the running
// max and sum a thread a row, tile after tile, from scalars (the max reads a tile's scores
// again only where the carried max raises max_shift's lower end past the tile's own). Walking
// each row's tiles with all its work, as one team a row, left a device of 132 SMs with 128
// warps of a block of 128 rows, each step a dozen reductions and memory round trips behind the
// last.
using stage_math::MaxStep;
using stage_math::OnlineTileStats;
using stage_math::OnlineTileSums;
using stage_math::RunningMax;
using stage_math::RunningSum;

template <class TeamKind>
__global__ void tile_stats_kernel(BoundedIn s, std::int64_t items, OnlineTileStats* stats) {
  const std::int64_t i = RowTeam<TeamKind>::row(items);
  if (i < 0) return;
  const auto team = RowTeam<TeamKind>::team();
  const double unknown[2] = {-stage_math::infinity(), -stage_math::infinity()};  // the running max comes later
  const OnlineTileStats t = stage_math::online_tile_stats(team, s.cols, s.row(i), unknown);
  if (team.leader()) stats[i] = t;
}

// Before the first tile: max -inf and sum 0, exact.
__global__ void max_scan_kernel(BoundedIn s, std::int64_t tiles, std::int64_t rows,
                                const OnlineTileStats* __restrict__ stats, MaxStep* __restrict__ steps) {
  FC_GRID_STRIDE(r, rows) {
    RunningMax carry{-stage_math::infinity(), {0, 0}};
    OnlineTileStats next = stats[r];
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t i = t * rows + r;
      const OnlineTileStats current = next;
      if (t + 1 < tiles) next = stats[i + rows];  // in flight while this tile's step is formed
      const MaxStep m = stage_math::online_max_step(stage_math::SerialTeam{}, carry, current, s.cols, s.row(i));
      steps[i] = m;
      carry = m.after();
    }
  }
}

template <class TeamKind>
__global__ void tile_values_kernel(BoundedIn s, std::int64_t items, const MaxStep* steps, BoundedOut p,
                                   BoundedOut max, BoundedOut rescale, stage_math::OutputTerms terms,
                                   OnlineTileSums* sums) {
  const std::int64_t i = RowTeam<TeamKind>::row(items);
  if (i < 0) return;
  const auto team = RowTeam<TeamKind>::team();
  const OnlineTileSums t =
      stage_math::online_tile_values(team, s.cols, s.row(i), steps[i], p.row(i), max.row(i), rescale.row(i), terms);
  if (team.leader()) sums[i] = t;
}

// The running sum's values, into the sum output (its bounds come last).
__global__ void sum_scan_kernel(std::int64_t tiles, std::int64_t rows, const MaxStep* __restrict__ steps,
                                const OnlineTileSums* __restrict__ sums, double* __restrict__ l) {
  FC_GRID_STRIDE(r, rows) {
    double carry = 0;
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t i = t * rows + r;
      l[i] = carry = stage_math::online_sum_value(carry, steps[i], sums[i]);
    }
  }
}

template <class TeamKind>
__global__ void stagnation_kernel(BoundedIn s, std::int64_t items, const double* l, const double* p,
                                  double* stagnated) {
  const std::int64_t i = RowTeam<TeamKind>::row(items);
  if (i < 0) return;
  const auto team = RowTeam<TeamKind>::team();
  const double x = stage_math::online_stagnation(team, s.cols, s.row(i), p + i * s.cols, l[i]);
  if (team.leader()) stagnated[i] = x;
}

__global__ void sum_bounds_scan_kernel(std::int64_t tiles, std::int64_t rows, const MaxStep* __restrict__ steps,
                                       const OnlineTileSums* __restrict__ sums, const double* __restrict__ stagnated,
                                       BoundedOut sum, stage_math::OutputTerms terms) {
  FC_GRID_STRIDE(r, rows) {
    RunningSum carry{0, {0, 0}};
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t i = t * rows + r;
      carry = stage_math::online_sum_step(carry, steps[i], sums[i], sum.value[i], stagnated[i], terms);
      sum.bound[i] = carry.error[stage_math::kWorst];
      sum.tight[i] = carry.error[stage_math::kTight];
    }
  }
}

// A device array of n T (plain data) in a DeviceMatrix's memory, freed with it.
template <class T>
T* array_in(DeviceMatrix& m) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) % sizeof(double) == 0, "plain doubles");
  return reinterpret_cast<T*>(m.data());
}
template <class T>
DeviceMatrix array_of(std::int64_t n, cudaStream_t stream) {
  return DeviceMatrix(n, static_cast<std::int64_t>(sizeof(T) / sizeof(double)), stream);
}

template <class TeamKind>
void online_softmax_phases(const DeviceBounded& scores, std::int64_t tiles, std::int64_t rows, DeviceBounded& p,
                           DeviceBounded& max, DeviceBounded& sum, DeviceBounded& rescale,
                           const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t items = tiles * rows;
  const unsigned item_blocks = RowTeam<TeamKind>::blocks(items);
  DeviceMatrix stats = array_of<OnlineTileStats>(items, stream), steps = array_of<MaxStep>(items, stream),
               sums = array_of<OnlineTileSums>(items, stream), stagnated(items, 1, stream);
  tile_stats_kernel<TeamKind><<<item_blocks, kThreads, 0, stream>>>(in(scores), items, array_in<OnlineTileStats>(stats));
  FC_CUDA_LAUNCH();
  max_scan_kernel<<<element_blocks(rows), kThreads, 0, stream>>>(in(scores), tiles, rows,
                                                                 array_in<OnlineTileStats>(stats),
                                                                 array_in<MaxStep>(steps));
  FC_CUDA_LAUNCH();
  tile_values_kernel<TeamKind><<<item_blocks, kThreads, 0, stream>>>(in(scores), items, array_in<MaxStep>(steps),
                                                                     out(p), out(max), out(rescale), terms,
                                                                     array_in<OnlineTileSums>(sums));
  FC_CUDA_LAUNCH();
  sum_scan_kernel<<<element_blocks(rows), kThreads, 0, stream>>>(tiles, rows, array_in<MaxStep>(steps),
                                                                 array_in<OnlineTileSums>(sums), sum.value.data());
  FC_CUDA_LAUNCH();
  stagnation_kernel<TeamKind><<<item_blocks, kThreads, 0, stream>>>(in(scores), items, sum.value.data(),
                                                                    p.value.data(), stagnated.data());
  FC_CUDA_LAUNCH();
  sum_bounds_scan_kernel<<<element_blocks(rows), kThreads, 0, stream>>>(tiles, rows, array_in<MaxStep>(steps),
                                                                        array_in<OnlineTileSums>(sums),
                                                                        stagnated.data(), out(sum), terms);
  FC_CUDA_LAUNCH();
}

// Each row's rescale factor of each tile (item t * rows + r), from the running max before and
// after the tile: once a row, for the accumulator's threads of its columns.
__global__ void rescale_factors_kernel(BoundedIn max, std::int64_t items, std::int64_t rows,
                                       stage_math::OutputTerms terms, stage_math::RescaleFactor* factors) {
  const double initial_max = -stage_math::infinity();
  FC_GRID_STRIDE(i, items) {
    const RowIn prev = i < rows ? RowIn{&initial_max, {nullptr, nullptr}} : max.row(i - rows);
    factors[i] = stage_math::rescale_factor(prev, max.row(i), terms);
  }
}

// The accumulator's chain a thread an element: each element's tiles in order, its value and
// errors carried in registers.
__global__ void accumulate_tiles_kernel(Products x, const stage_math::RescaleFactor* __restrict__ factors,
                                        std::int64_t tiles, std::int64_t rows, BoundedOut rescaled, BoundedOut acc,
                                        stage_math::OutputTerms rescale_terms, stage_math::PvTerms pv_terms) {
  FC_GRID_STRIDE(element, rows * x.cols) {
    const std::int64_t r = element / x.cols, c = element % x.cols;
    double value = 0, error[2] = {0, 0};  // before the first tile: 0, exact
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t row = t * rows + r, i = row * x.cols + c;
      double r_value = 0, r_bound[2];
      stage_math::rescale_element(factors[row], value, error, &r_value, r_bound, rescale_terms);
      rescaled.value[i] = r_value;
      rescaled.bound[i] = r_bound[stage_math::kWorst];
      rescaled.tight[i] = r_bound[stage_math::kTight];
      pv_element_at(x, i, r_value, r_bound[stage_math::kWorst], r_bound[stage_math::kTight], pv_terms, &value,
                    &error[stage_math::kWorst], &error[stage_math::kTight]);
      acc.value[i] = value;
      acc.bound[i] = error[stage_math::kWorst];
      acc.tight[i] = error[stage_math::kTight];
    }
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
    online_softmax_phases<BlockTeam>(scores, tiles, rows, p, max, sum, rescale, terms, stream);
  } else {
    online_softmax_phases<WarpTeam>(scores, tiles, rows, p, max, sum, rescale, terms, stream);
  }
}

void accumulate_tiles(const PvProducts& x, const DeviceBounded& max, DeviceBounded& rescaled, DeviceBounded& acc,
                      const stage_math::OutputTerms& rescale_terms, const stage_math::PvTerms& pv_terms,
                      cudaStream_t stream) {
  const std::int64_t n = acc.value.size(), rows = x.rows_per_tile;
  if (n == 0 || rows == 0) return;
  const std::int64_t items = acc.value.rows(), tiles = items / rows;
  DeviceMatrix factors = array_of<stage_math::RescaleFactor>(items, stream);
  rescale_factors_kernel<<<element_blocks(items), kThreads, 0, stream>>>(
      in(max), items, rows, rescale_terms, array_in<stage_math::RescaleFactor>(factors));
  FC_CUDA_LAUNCH();
  accumulate_tiles_kernel<<<element_blocks(rows * acc.value.cols()), kThreads, 0, stream>>>(
      products_of(x, n, acc.value.cols()), array_in<stage_math::RescaleFactor>(factors), tiles, rows, out(rescaled),
      out(acc), rescale_terms, pv_terms);
  FC_CUDA_LAUNCH();
}

}  // namespace fc::gpu

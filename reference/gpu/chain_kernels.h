#pragma once
// The GPU reference's kernels over stacks of tiles (stage_kernels.h, TileStack): P.V's
// bounds from the products its GEMMs formed, and the blocked chain's two recurrences over
// tiles, so that a row's every tile costs no launch of its own: the online softmax in the
// phases of stage_math.h (each tile's work over every tile at once, the running max and sum a
// thread a row), and the rescaled accumulator a thread an element, walking its tiles in order.
#include "reference/gpu/device_matrix.h"
#include "reference/stage_math.h"

namespace fc::gpu {

// What P.V's GEMMs give every element of a stack of tiles ([tiles * rows, cols], tile t
// against its own value rows): each block of keys' products and nominal sizes (`blocks`
// matrices of the stack's size, one after another), sum |p||v| (null without tensor cores:
// the accumulated nominal sizes stand for it), E(p)|v| of both bounds (null: an exact p),
// and with operand rounding sum p^2 v^2 (null: none) and each tile's column sums of v
// (tiles x cols; v_norm null with squares).
struct PvProducts {
  const DeviceMatrix *value_blocks, *nominal_blocks;
  std::int64_t blocks = 0, rows_per_tile = 0;
  const DeviceMatrix *magnitude = nullptr, *propagated_worst = nullptr, *propagated_tight = nullptr;
  const DeviceMatrix *squares = nullptr, *operand_floor = nullptr, *v_norm = nullptr;
};

// out = acc + p v with both bounds, element by element (acc null: none; else the stack's size).
void pv_finish(const PvProducts& x, const DeviceBounded* acc, const stage_math::PvTerms& terms, DeviceBounded& out,
               cudaStream_t stream);

// The online softmax of a stack of score tiles of one row block, tile after tile: tile t
// starts from tile t - 1's max and sum (-inf and 0 before the first). p [tiles * rows, cols],
// max, sum and rescale [tiles * rows, 1].
void online_softmax_tiles(const DeviceBounded& scores, std::int64_t tiles, DeviceBounded& p, DeviceBounded& max,
                          DeviceBounded& sum, DeviceBounded& rescale, const stage_math::OutputTerms& terms,
                          cudaStream_t stream);

// The blocked chain's accumulator over a stack of tiles: rescaled[t] = rescale(acc[t - 1],
// max[t - 1], max[t]) (acc 0 and max -inf before the first tile), acc[t] = rescaled[t] +
// p~[t] v[t] from the products x. max is the online softmax's [tiles * rows, 1].
void accumulate_tiles(const PvProducts& x, const DeviceBounded& max, DeviceBounded& rescaled, DeviceBounded& acc,
                      const stage_math::OutputTerms& rescale_terms, const stage_math::PvTerms& pv_terms,
                      cudaStream_t stream);

}  // namespace fc::gpu

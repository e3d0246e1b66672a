#pragma once
// The device side of the GPU reference: kernels that apply the shared element and row math
// (reference/stage_math.h) to device matrices, a warp per row, and the few elementwise
// helpers the GEMMs around them need. Each launches on `stream` and checks the launch.
#include <vector>

#include "core/head_mask.h"
#include "reference/gpu/device_matrix.h"
#include "reference/stage_math.h"

namespace fc::gpu {

// out = |x|, or with a floor > 0 (tensor cores) max(|x|, floor) where x is nonzero.
void nominal(const DeviceMatrix& x, double floor, DeviceMatrix& out, cudaStream_t stream);
// The formats widen() reads: fp16, bf16, fp32, fp64.
bool widens(DType t);
enum class Memory { host, device };
// out[0, n) = scale x the n elements at `data` stored in format t, widened to FP64 on
// the device; from the host they are copied as stored (2, 4 or 8 bytes an element) first.
void widen(const void* data, Memory where, DType t, std::int64_t n, double scale, double* out, cudaStream_t stream);

// Over rows [first, first + count) of v, per column c: floor[c] = eta sum |v|, norm[c] =
// sqrt(sum v^2) (floor and norm 1 x v's cols).
void column_sums(const DeviceMatrix& v, std::int64_t first, std::int64_t count, double eta, DeviceMatrix& floor,
                 DeviceMatrix& norm, cudaStream_t stream);

// out = x^2, element by element.
void square(const DeviceMatrix& x, DeviceMatrix& out, cudaStream_t stream);
// into += x.
void add(DeviceMatrix& into, const DeviceMatrix& x, cudaStream_t stream);
// P.V's prefix tracking over `blocks` consecutive blocks of keys, each block's products
// already summed (value_blocks, nominal_blocks: blocks matrices the size of value, one after
// another). Starting from value (the accumulator, or 0), accumulated = |value| and reach = it,
// for each block: reach = max(reach, |value| + nominal), accumulated += nominal, value +=
// the block's value; and last reach = max(reach, |value|).
void prefix_scan(const double* value_blocks, const double* nominal_blocks, std::int64_t blocks, DeviceMatrix& value,
                 DeviceMatrix& accumulated, DeviceMatrix& reach, cudaStream_t stream);

// out [rows, keys] = the bias of each (row, key): row r is the head's query row rows[r]
// (1 x rows, row indices held exactly as doubles), or first_row + r when rows is null; dense
// (null without one) holds the dense mask part of the same rows, widened.
void mask_bias(const HeadMask& mask, const DeviceMatrix* rows, std::int64_t first_row, const DeviceMatrix* dense,
               DeviceMatrix& out, cudaStream_t stream);

// Scores from t = scale q k^T and its magnitude, with the bias of key columns from col_begin.
void qk_elements(const DeviceMatrix& t, const DeviceMatrix& magnitude, const DeviceMatrix& bias, std::int64_t col_begin,
                 const stage_math::QkTerms& terms, DeviceBounded& out, cudaStream_t stream);
void softmax_rows(const DeviceBounded& scores, DeviceBounded& p, DeviceBounded& max, DeviceBounded& sum,
                  const stage_math::OutputTerms& terms, cudaStream_t stream);
void online_softmax_rows(const DeviceBounded& scores, const DeviceBounded& prev_max, const DeviceBounded& prev_sum,
                         DeviceBounded& p, DeviceBounded& max, DeviceBounded& sum, DeviceBounded& rescale,
                         const stage_math::OutputTerms& terms, cudaStream_t stream);
void rescale_rows(const DeviceBounded& acc, const DeviceBounded& prev_max, const DeviceBounded& new_max,
                  DeviceBounded& out, const stage_math::OutputTerms& terms, cudaStream_t stream);

// What pv_element reads, per element or per column (null where the operand is not rounded).
struct PvInputs {
  const DeviceMatrix *value, *accumulated, *reach, *magnitude, *propagated_worst, *propagated_tight;
  const DeviceMatrix* squares;        // null: no operand rounding
  const DeviceMatrix* operand_floor;  // 1 x cols
  const DeviceMatrix* v_norm;         // 1 x cols, null with squares
};
void pv_elements(const PvInputs& in, const stage_math::PvTerms& terms, DeviceBounded& out, cudaStream_t stream);

void normalize_rows(const DeviceBounded& acc, const DeviceBounded& sum, DeviceBounded& out,
                    const stage_math::OutputTerms& terms, cudaStream_t stream);
void lse_rows(const DeviceBounded& max, const DeviceBounded& sum, DeviceBounded& out,
              const stage_math::OutputTerms& terms, cudaStream_t stream);
void combine_rows(const std::vector<const DeviceBounded*>& outs, const std::vector<const DeviceBounded*>& lses,
                  DeviceBounded& out, const stage_math::OutputTerms& terms, cudaStream_t stream);
void combine_lse_rows(const std::vector<const DeviceBounded*>& lses, DeviceBounded& out,
                      const stage_math::OutputTerms& terms, cudaStream_t stream);

}  // namespace fc::gpu

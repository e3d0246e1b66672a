#pragma once
// The device side of the GPU reference: kernels that apply the shared element and row math
// (reference/stage_math.h) to device matrices, a warp per row, and the few elementwise
// helpers the GEMMs around them need. Each launches on `stream` and checks the launch.
#include <vector>

#include "reference/gpu/device_matrix.h"
#include "reference/stage_math.h"

namespace fc::gpu {

// out = |x|, or with a floor > 0 (tensor cores) max(|x|, floor) where x is nonzero.
void nominal(const DeviceMatrix& x, double floor, DeviceMatrix& out, cudaStream_t stream);
// The formats widen() reads: fp16, bf16, fp32, fp64.
bool widens(DType t);
// out (n elements) = scale x the n elements at `host` stored in format t, copied as stored
// (2, 4 or 8 bytes an element) and widened to FP64 on the device.
void widen(const void* host, DType t, std::int64_t n, double scale, DeviceMatrix& out, cudaStream_t stream);

// out = x^2, element by element.
void square(const DeviceMatrix& x, DeviceMatrix& out, cudaStream_t stream);
// into += x.
void add(DeviceMatrix& into, const DeviceMatrix& x, cudaStream_t stream);
// One step of P.V's prefix tracking: reach = max(reach, |value| + block), accumulated += block.
void reach_step(const DeviceMatrix& value, const DeviceMatrix& block, DeviceMatrix& reach, DeviceMatrix& accumulated,
                cudaStream_t stream);
// reach = max(reach, |value|).
void reach_final(const DeviceMatrix& value, DeviceMatrix& reach, cudaStream_t stream);

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

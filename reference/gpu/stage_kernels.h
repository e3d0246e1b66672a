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
// How the device code names them (widening and ULP counting): 0 fp16, 1 bf16, 2 fp32, 3 fp64;
// an fc::Error for any other.
int format_code(DType t);
enum class Memory { host, device };
// out[0, n) = scale x the n elements at `data` stored in format t, widened to FP64 on
// the device; from the host they are copied as stored (2, 4 or 8 bytes an element) first.
void widen(const void* data, Memory where, DType t, std::int64_t n, double scale, double* out, cudaStream_t stream);

// out = scale x rows [first, first + count) of each of the device tensors at `sources` (each
// rows of `cols` elements in format t), widened, one after another: a stack of them (one
// source: a plain widening, without a table of sources).
void widen_rows_each(const std::vector<const void*>& sources, DType t, std::int64_t first, std::int64_t count,
                     std::int64_t cols, double scale, double* out, cudaStream_t stream);
// The same with the rows listed (a sample's rows spread over the tensors): one launch whatever
// their order.
void widen_rows_each(const std::vector<const void*>& sources, DType t, const std::vector<std::int64_t>& rows,
                     std::int64_t cols, double scale, double* out, cudaStream_t stream);

// Per tile t of `tiles` and column c, over rows [first + t stride, + count) of v: floor(t, c) =
// eta sum |v|, norm(t, c) = sqrt(sum v^2) (floor and norm tiles x v's cols).
void column_sums(const DeviceMatrix& v, std::int64_t first, std::int64_t count, std::int64_t tiles,
                 std::int64_t stride, double eta, DeviceMatrix& floor, DeviceMatrix& norm, cudaStream_t stream);

// o = x with each bound capped to the range of its column of v's rows [first, first + count)
// (stage_math::range_cap); count > 0.
void cap_to_value_range(const DeviceBounded& x, const DeviceMatrix& v, std::int64_t first, std::int64_t count,
                        DeviceBounded& o, const stage_math::RangeTerms& terms, cudaStream_t stream);
// out = x^2, element by element.
void square(const DeviceMatrix& x, DeviceMatrix& out, cudaStream_t stream);
// into += x.
void add(DeviceMatrix& into, const DeviceMatrix& x, cudaStream_t stream);
// out [rows, keys] = the bias of each (row, key): row r is the head's query row rows[r]
// (1 x rows, row indices held exactly as doubles), or first_row + r when rows is null; dense
// (null without one) holds the dense mask part of the same rows, widened.
void mask_bias(const HeadMask& mask, const DeviceMatrix* rows, std::int64_t first_row, const DeviceMatrix* dense,
               DeviceMatrix& out, cudaStream_t stream);

// A stack of tiles: `tiles` matrices of rows_per_tile rows one after another, tile t's
// columns `key_stride` keys after tile t - 1's (one tile: rows_per_tile = all its rows).
struct TileStack {
  std::int64_t tiles = 1, rows_per_tile = 0, key_stride = 0;
};

// Scores from t = scale q k^T and its magnitude, with the bias of key columns from col_begin
// (a stack: tile t's from col_begin + t key_stride, its rows those of the bias).
void qk_elements(const DeviceMatrix& t, const DeviceMatrix& magnitude, const DeviceMatrix& bias, std::int64_t col_begin,
                 const TileStack& stack, const stage_math::QkTerms& terms, DeviceBounded& out, cudaStream_t stream);
void softmax_rows(const DeviceBounded& scores, DeviceBounded& p, DeviceBounded& max, DeviceBounded& sum,
                  const stage_math::OutputTerms& terms, cudaStream_t stream);
void online_softmax_rows(const DeviceBounded& scores, const DeviceBounded& prev_max, const DeviceBounded& prev_sum,
                         DeviceBounded& p, DeviceBounded& max, DeviceBounded& sum, DeviceBounded& rescale,
                         const stage_math::OutputTerms& terms, cudaStream_t stream);
void rescale_rows(const DeviceBounded& acc, const DeviceBounded& prev_max, const DeviceBounded& new_max,
                  DeviceBounded& out, const stage_math::OutputTerms& terms, cudaStream_t stream);

void normalize_rows(const DeviceBounded& acc, const DeviceBounded& sum, DeviceBounded& out,
                    const stage_math::OutputTerms& terms, cudaStream_t stream);
void lse_rows(const DeviceBounded& max, const DeviceBounded& sum, DeviceBounded& out,
              const stage_math::OutputTerms& terms, cudaStream_t stream);
void combine_rows(const std::vector<const DeviceBounded*>& outs, const std::vector<const DeviceBounded*>& lses,
                  DeviceBounded& out, const stage_math::OutputTerms& terms, cudaStream_t stream);
void combine_lse_rows(const std::vector<const DeviceBounded*>& lses, DeviceBounded& out,
                      const stage_math::OutputTerms& terms, cudaStream_t stream);

}  // namespace fc::gpu

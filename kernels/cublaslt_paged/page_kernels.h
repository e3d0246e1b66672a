#pragma once
// The element-wise stages around the cuBLASLt matmuls of the cuBLASLt implementations, over
// [rows, cols] row-major blocks where rows = B*H*Sq (one row per query of every head).
#include <cuda_runtime_api.h>

#include "core/problem.h"
#include "kernels/common/device_mask.h"
#include "stages/tap.h"

namespace fc {

// Scores as a softmax reads them: fp32, or fp16 (the fp16-scores fault) holding the
// stored value; `scale` turns a stored value into a score (1, or the softmax scale when the
// scores were stored before it).
struct ScoreInput {
  const void* data = nullptr;
  DType dtype = DType::f32;
  float scale = 1.0f;
};

// Fault injection in the softmax kernels (docs/faults.md); both true on the clean path.
struct SoftmaxOptions {
  bool subtract_max = true;  // no-max-subtract: exp(s) instead of exp(s - max)
  bool guard_masked = true;  // masked-row-nan: exp(-inf - (-inf)) for a row with no key
};

// scores[row, c] += mask bias of (first_row + row, key j0 + c) / scale, for `rows` rows of a
// page of `cols` keys; with a softcap c > 0 the score is first capped, c tanh(s / c).
void launch_apply_mask(void* scores, DType dtype, float scale, float softcap, const Shape& shape, long long first_row,
                       long long rows, int j0, int cols, const DeviceMask& mask, cudaStream_t stream);

// The flags the softmax and normalize kernels fold in (stages/tap.h): what they read is the
// stage before's output in memory, what they store their own. Empty slots are off.
struct OnlineSoftmaxFlags {
  FlagSlot scores;               // reads the page's scores
  FlagSlot p_tilde, max, sum;    // stores
  FlagSlot acc_before;           // reads the accumulator before its rescale (the last P~.V)
  FlagSlot acc_after;            // stores the rescaled accumulator
};
struct RowSoftmaxFlags {
  FlagSlot scores;               // reads
  FlagSlot probs, max, sum;      // stores
};
struct NormalizeFlags {
  FlagSlot acc;                  // reads
  FlagSlot out;                  // stores
};

// The running accumulator [rows, cols] that a page's softmax rescales by its factor r_j
// (the rescale stage, fused into the same pass); null acc: no rescale.
struct Rescale {
  float* acc = nullptr;
  int cols = 0;
};

// The widest page the online softmax takes (it holds a page row in registers).
inline constexpr int kMaxOnlineSoftmaxCols = 256;

// One page of online softmax: from the page's scores and the running max and sum (ignored
// on the first page) to p~ = exp(s - max) in the input format, the new max and sum (in
// place), and the rescale factor r of the accumulator (0 on the first page), with which it
// multiplies `rescale.acc` when given.
void launch_online_softmax(ScoreInput scores, long long rows, int cols, bool first_page, float* row_max,
                           float* row_sum, float* factor, void* p_tilde, DType dtype, SoftmaxOptions options,
                           Rescale rescale, const OnlineSoftmaxFlags& flags, cudaStream_t stream);

// Whole-row softmax: p = exp(s - max) / sum in the input format, with the row max and sum.
void launch_row_softmax(ScoreInput scores, long long rows, int cols, float* row_max, float* row_sum, void* probs,
                        DType dtype, SoftmaxOptions options, const RowSoftmaxFlags& flags, cudaStream_t stream);

// out[row, :] = acc[row, :] / sum[row] in the input format (0 where the sum is 0).
void launch_normalize_rows(const float* acc, const float* row_sum, long long rows, int cols, void* out, DType dtype,
                           const NormalizeFlags& flags, cudaStream_t stream);

}  // namespace fc

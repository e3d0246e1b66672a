#pragma once
// compare_head (reference/compare.h) on the device: one pass over the kernel's values and a
// reference's value and bounds, reduced to counts, maxima and the indices the report names.
// The metrics are assembled on the host from this (gpu_evaluator.cpp).
#include <cstdint>

#include "reference/gpu/device_matrix.h"

namespace fc::gpu {

// An element the report names: its row-major index in the compared rows x cols (-1: none),
// the kernel's value, the reference and both bounds (tight already capped at the worst case).
struct ReportedElement {
  long long index = -1;
  double kernel = 0, reference = 0, bound = 0, tight = 0;
};

struct DeviceComparison {
  long long nan_kernel = 0, posinf_kernel = 0, neginf_kernel = 0, masked_neg_inf = 0;
  long long nan_reference = 0, inf_reference = 0, over_bound = 0, over_tight = 0;
  double max_abs_error = 0, max_rel_error = 0, max_normalized_error = 0;
  long long max_ulp = 0;
  // The first element over the tight bound, over the worst-case bound, and the first of the
  // largest error / tight bound (which is `worst_tight`).
  ReportedElement first_over_tight, first_over_bound, worst;
  double worst_tight = 0;
};

// Over the top-left rows x cols of each of the `segments` equal row blocks of `kernel` and of
// `reference` (a stack of tiles, tile_stack.h; their own row strides), into results[s] for
// segment s, on the device; nothing is read back. rows x cols and segments must not be 0.
void compare_segments(const DeviceMatrix& kernel, const DeviceBounded& reference, std::int64_t segments,
                      std::int64_t rows, std::int64_t cols, DType kernel_format, DeviceComparison* results,
                      cudaStream_t stream);

}  // namespace fc::gpu

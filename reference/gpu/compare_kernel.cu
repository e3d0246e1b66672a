#include "reference/gpu/compare_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>

#include "core/check.h"
#include "reference/gpu/stage_kernels.h"
#include "reference/gpu/thread_pool.h"
#include "reference/stage_math.h"

namespace fc::gpu {
namespace {

using stage_math::infinity;
using stage_math::is_finite;
using stage_math::larger;

constexpr int kThreads = 256;
constexpr long long kNone = LLONG_MAX;  // an index not found, while reducing

// Partial results while reducing: indices not found are kNone so that min() folds them.
struct Partial {
  long long counts[8];  // nan_kernel, posinf, neginf, masked, nan_reference, inf_reference, over_bound, over_tight
  double max_abs, max_rel, max_normalized;
  long long max_ulp, first_over_tight, first_over_bound, worst;
  double worst_tight;
};

__device__ void fold(Partial& a, const Partial& b) {
  for (int i = 0; i < 8; ++i) a.counts[i] += b.counts[i];
  a.max_abs = larger(a.max_abs, b.max_abs);
  a.max_rel = larger(a.max_rel, b.max_rel);
  a.max_normalized = larger(a.max_normalized, b.max_normalized);
  a.max_ulp = a.max_ulp > b.max_ulp ? a.max_ulp : b.max_ulp;
  a.first_over_tight = a.first_over_tight < b.first_over_tight ? a.first_over_tight : b.first_over_tight;
  a.first_over_bound = a.first_over_bound < b.first_over_bound ? a.first_over_bound : b.first_over_bound;
  // The largest error / tight bound, the first of equals (compare_head keeps the first).
  if (b.worst != kNone && (a.worst == kNone || b.worst_tight > a.worst_tight ||
                           (b.worst_tight == a.worst_tight && b.worst < a.worst))) {
    a.worst = b.worst;
    a.worst_tight = b.worst_tight;
  }
}

__device__ Partial none() {
  Partial p{};
  p.first_over_tight = p.first_over_bound = p.worst = kNone;
  return p;
}

// A's fold with the partial of the lane `offset` away (fold is commutative and associative:
// the result does not depend on the order, ties going to the first index).
__device__ void fold_from_lane(Partial& a, int offset) {
  Partial b;
  for (int i = 0; i < 8; ++i) b.counts[i] = __shfl_xor_sync(0xffffffffu, a.counts[i], offset);
  b.max_abs = __shfl_xor_sync(0xffffffffu, a.max_abs, offset);
  b.max_rel = __shfl_xor_sync(0xffffffffu, a.max_rel, offset);
  b.max_normalized = __shfl_xor_sync(0xffffffffu, a.max_normalized, offset);
  b.max_ulp = __shfl_xor_sync(0xffffffffu, a.max_ulp, offset);
  b.first_over_tight = __shfl_xor_sync(0xffffffffu, a.first_over_tight, offset);
  b.first_over_bound = __shfl_xor_sync(0xffffffffu, a.first_over_bound, offset);
  b.worst = __shfl_xor_sync(0xffffffffu, a.worst, offset);
  b.worst_tight = __shfl_xor_sync(0xffffffffu, a.worst_tight, offset);
  fold(a, b);
}

// The block's partials folded: within each warp by shuffles, then the warps' by the first
// warp. Thread 0 returns the block's; every thread of the block must call it.
__device__ Partial fold_block(Partial p) {
  __shared__ Partial warps[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) fold_from_lane(p, offset);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (lane == 0) warps[warp] = p;
  __syncthreads();
  if (warp != 0) return p;
  p = lane < static_cast<int>(blockDim.x / 32) ? warps[lane] : none();
  for (int offset = 16; offset > 0; offset /= 2) fold_from_lane(p, offset);
  return p;
}

// normalized_error of compare.h.
__device__ double normalized_error(double kernel, double reference, double bound) {
  if (is_finite(reference) && is_finite(kernel)) {
    const double err = fabs(kernel - reference);
    return err == 0 ? 0.0 : (bound > 0 ? err / bound : infinity());
  }
  const bool same = reference == reference && kernel == reference;
  return same ? 0.0 : infinity();
}

// round_to and ulp_distance of core/numeric.h: fp16 and bf16 through fp32, round to nearest even.
__device__ double round_to(int format, double x) {
  switch (format) {
    case 0: return __half2float(__float2half_rn(static_cast<float>(x)));
    case 1: return __bfloat162float(__float2bfloat16_rn(static_cast<float>(x)));
    case 2: return static_cast<float>(x);
    default: return x;
  }
}
__device__ long long ordered_bits(int format, double x) {
  long long magnitude;
  bool negative;
  switch (format) {
    case 0: {
      const unsigned short b = __half_as_ushort(__float2half_rn(static_cast<float>(x)));
      magnitude = b & 0x7FFF;
      negative = (b & 0x8000) != 0;
      break;
    }
    case 1: {
      const unsigned short b = __bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(x)));
      magnitude = b & 0x7FFF;
      negative = (b & 0x8000) != 0;
      break;
    }
    case 2: {
      const unsigned b = __float_as_uint(static_cast<float>(x));
      magnitude = b & 0x7FFFFFFFu;
      negative = (b & 0x80000000u) != 0;
      break;
    }
    default: {
      const unsigned long long b = static_cast<unsigned long long>(__double_as_longlong(x));
      magnitude = static_cast<long long>(b & 0x7FFFFFFFFFFFFFFFull);
      negative = (b >> 63) != 0;
    }
  }
  return negative ? -magnitude : magnitude;
}
__device__ long long ulp_distance(int format, double a, double b) {
  const double ra = round_to(format, a), rb = round_to(format, b);
  if (!is_finite(ra) || !is_finite(rb)) return ra == rb ? 0 : LLONG_MAX;
  const long long d = ordered_bits(format, ra) - ordered_bits(format, rb);
  return d < 0 ? -d : d;
}

// Segment blockIdx.y of a stack: its rows kernel_segment and ref_segment elements after the
// previous segment's.
__global__ void compare_kernel(const double* kernel, std::int64_t kernel_ld, const double* value, const double* bound,
                               const double* tight, std::int64_t ref_ld, std::int64_t kernel_segment,
                               std::int64_t ref_segment, std::int64_t rows, std::int64_t cols, int format,
                               Partial* partials) {
  kernel += blockIdx.y * kernel_segment;
  value += blockIdx.y * ref_segment;
  if (bound) bound += blockIdx.y * ref_segment;
  if (tight) tight += blockIdx.y * ref_segment;
  Partial p = none();
  const std::int64_t n = rows * cols;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    const double k = kernel[r * kernel_ld + c], x = value[r * ref_ld + c];
    const double b = bound ? bound[r * ref_ld + c] : 0.0;  // null: an exact reference
    const double t = bound && tight ? stage_math::smaller(tight[r * ref_ld + c], b) : b;
    if (k != k) ++p.counts[0];
    if (k == infinity()) ++p.counts[1];
    if (k == -infinity()) ++p.counts[2];
    if (k == -infinity() && x == -infinity()) ++p.counts[3];
    if (x != x) ++p.counts[4];
    if (stage_math::is_inf(x)) ++p.counts[5];
    if (is_finite(x) && is_finite(k)) {
      const double err = fabs(k - x);
      p.max_abs = larger(p.max_abs, err);
      if (x != 0) p.max_rel = larger(p.max_rel, err / fabs(x));
      const long long u = ulp_distance(format, k, x);
      p.max_ulp = p.max_ulp > u ? p.max_ulp : u;
    }
    const double normalized = normalized_error(k, x, b), tight_normalized = normalized_error(k, x, t);
    const bool over_worst = normalized > 1.0, over_tight = tight_normalized > 1.0 || over_worst;
    if (over_worst) {
      ++p.counts[6];
      if (p.first_over_bound == kNone) p.first_over_bound = i;
    }
    if (over_tight) {
      ++p.counts[7];
      if (p.first_over_tight == kNone) p.first_over_tight = i;
    }
    p.max_normalized = larger(p.max_normalized, normalized);
    if (p.worst == kNone || tight_normalized > p.worst_tight) {
      p.worst = i;
      p.worst_tight = tight_normalized;
    }
  }
  p = fold_block(p);
  if (threadIdx.x == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = p;
}

struct Reported {
  const double *kernel, *value, *bound, *tight;
  std::int64_t kernel_ld, ref_ld, cols;

  __device__ Reported segment(std::int64_t kernel_segment, std::int64_t ref_segment, unsigned s) const {
    Reported r = *this;
    r.kernel += s * kernel_segment;
    r.value += s * ref_segment;
    if (r.bound) r.bound += s * ref_segment;
    if (r.tight) r.tight += s * ref_segment;
    return r;
  }

  __device__ ReportedElement at(long long i) const {
    ReportedElement e;
    if (i == kNone) return e;
    const std::int64_t r = i / cols, c = i % cols;
    e.index = i;
    e.kernel = kernel[r * kernel_ld + c];
    e.reference = value[r * ref_ld + c];
    e.bound = bound ? bound[r * ref_ld + c] : 0.0;
    e.tight = bound && tight ? stage_math::smaller(tight[r * ref_ld + c], e.bound) : e.bound;
    return e;
  }
};

// Segment blockIdx.x's blocks' partials folded into one (a block of kThreads), and its
// reported elements read.
__global__ void finish_kernel(const Partial* partials, unsigned count, Reported stack, std::int64_t kernel_segment,
                              std::int64_t ref_segment, DeviceComparison* results) {
  const Reported reported = stack.segment(kernel_segment, ref_segment, blockIdx.x);
  partials += blockIdx.x * count;
  DeviceComparison* out = results + blockIdx.x;
  Partial p = none();
  for (unsigned i = threadIdx.x; i < count; i += kThreads) fold(p, partials[i]);
  p = fold_block(p);
  if (threadIdx.x != 0) return;
  const Partial& t = p;
  DeviceComparison d;
  d.nan_kernel = t.counts[0];
  d.posinf_kernel = t.counts[1];
  d.neginf_kernel = t.counts[2];
  d.masked_neg_inf = t.counts[3];
  d.nan_reference = t.counts[4];
  d.inf_reference = t.counts[5];
  d.over_bound = t.counts[6];
  d.over_tight = t.counts[7];
  d.max_abs_error = t.max_abs;
  d.max_rel_error = t.max_rel;
  d.max_normalized_error = t.max_normalized;
  d.max_ulp = t.max_ulp;
  d.first_over_tight = reported.at(t.first_over_tight);
  d.first_over_bound = reported.at(t.first_over_bound);
  d.worst = reported.at(t.worst);
  d.worst_tight = t.worst_tight;
  *out = d;
}

}  // namespace

void compare_segments(const DeviceMatrix& kernel, const DeviceBounded& reference, std::int64_t segments,
                      std::int64_t rows, std::int64_t cols, DType kernel_format, DeviceComparison* results,
                      cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (segments == 0 || n == 0) throw Error("compare: nothing to compare");
  if (kernel.rows() % segments != 0 || reference.value.rows() % segments != 0) {
    throw Error("compare: a stack that is not whole segments");
  }
  const std::int64_t kernel_segment = kernel.rows() / segments * kernel.cols();
  const std::int64_t ref_segment = reference.value.rows() / segments * reference.value.cols();
  const int format = format_code(kernel_format);
  // A few hundred blocks fill a GPU for a pass that reads each element once.
  const std::int64_t wanted = std::max<std::int64_t>(1, 264 / segments);
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, wanted));
  auto* partials = static_cast<Partial*>(allocate_async(segments * blocks * sizeof(Partial), stream));
  const double* bound = reference.bound.size() > 0 ? reference.bound.data() : nullptr;
  const double* tight = reference.tight.size() > 0 ? reference.tight.data() : nullptr;
  cudaError_t status = cudaSuccess;
  // At most 65535 segments a launch (a grid's y extent).
  for (std::int64_t first = 0; first < segments && status == cudaSuccess; first += 65535) {
    const std::int64_t count = std::min<std::int64_t>(65535, segments - first);
    const auto at = [&](const double* base, std::int64_t segment) { return base ? base + first * segment : nullptr; };
    const dim3 grid(blocks, static_cast<unsigned>(count));
    compare_kernel<<<grid, kThreads, 0, stream>>>(at(kernel.data(), kernel_segment), kernel.cols(),
                                                  at(reference.value.data(), ref_segment), at(bound, ref_segment),
                                                  at(tight, ref_segment), reference.value.cols(), kernel_segment,
                                                  ref_segment, rows, cols, format, partials + first * blocks);
    status = cudaGetLastError();
    if (status != cudaSuccess) break;
    const Reported reported{at(kernel.data(), kernel_segment), at(reference.value.data(), ref_segment),
                            at(bound, ref_segment), at(tight, ref_segment), kernel.cols(), reference.value.cols(), cols};
    finish_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(partials + first * blocks, blocks, reported,
                                                                        kernel_segment, ref_segment, results + first);
    status = cudaGetLastError();
  }
  cudaFreeAsync(partials, stream);
  FC_CUDA(status);
}

}  // namespace fc::gpu

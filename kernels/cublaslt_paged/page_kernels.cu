#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/error.h"
#include "kernels/common/element.cuh"
#include "kernels/common/warp_reduce.cuh"
#include "kernels/cublaslt_paged/page_kernels.h"
#include "stages/flag_accumulator.cuh"

namespace fc {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr float kNegInf = -__builtin_huge_valf();

__device__ __forceinline__ long long warp_row() { return static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.y; }

// `scores` holds rows [first_row, first_row + rows) of the B*H*Sq rows.
template <class S>
__global__ void apply_mask_kernel(S* scores, float scale, float softcap, float inverse_cap, int heads, int q_len, int j0,
                                  int cols, DeviceMask mask, long long first_row, long long rows) {
  const long long row = warp_row();
  if (row >= rows) return;
  const int i = static_cast<int>((first_row + row) % q_len), bh = static_cast<int>((first_row + row) / q_len);
  for (int c = threadIdx.x; c < cols; c += 32) {
    const float bias = device_mask_bias(mask, bh / heads, bh % heads, i, j0 + c);
    float s = to_float(scores[row * cols + c]);
    if (softcap > 0.0f) s = softcap * tanhf(s * inverse_cap);
    scores[row * cols + c] = from_float<S>(s + bias / scale);
  }
}

// The max a row's exponentials are taken against: the row max, or 0 when the row has no key
// (so exp(-inf - 0) = 0 rather than NaN), or 0 always without max subtraction (a fault).
__device__ __forceinline__ float exp_origin(float top, SoftmaxOptions o) {
  if (!o.subtract_max) return 0.0f;
  return top == kNegInf && o.guard_masked ? 0.0f : top;
}

// Blocks an SM of the kernels below, as their launch bounds promise (the registers capped to
// fit them): flagged or not, and the page row's elements per lane. Flagged, some registers
// spill (-Xptxas -v: the online softmax 36 bytes at four elements a lane, the whole-row
// softmax up to 124), which measured cheaper than a block fewer: cublaslt-paged traced at
// B16 H16 S4096 D64 was 1.13x its untraced run with six blocks and 1.15x with five (H100), and
// with a row loaded ahead at five blocks 1.38x against 1.28x (H200). Eight blocks (32 registers,
// 96 bytes spilled) measured 1.244x against six blocks' 1.111x and 1.120x and five's 1.141x in
// one run (H100, 2026-11-28; seven blocks get the same 32 registers as eight). The flagged online softmax
// runs at 68% of the warps and 1.43x the time of the other (ncu, H100): that occupancy is the
// traced run's overhead. Keeping the taps' state in shared memory instead (a record a warp, each
// row's tallies merged with redux.sync) fits 32 registers and eight blocks, and measured worse:
// 1.145x (1.176x at six blocks) against these taps' 1.113x, the same H100, 2026-11-27. The
// per-row reductions cost more than the warps gained. Moving only the row max and sum taps to
// shared memory (lane 0's) removed the 36 bytes of spill and changed nothing (1.111x): the
// spill is not the cost either. Flagging a lane's four scores and four p~ as one group each (one
// finite test for four, a zero past a partial page) spilled 68 bytes and measured 1.129x (1.078x
// causal) against 1.110x (1.070x) the same day: rejected.
constexpr int blocks_per_sm(bool flagged, int per_lane = 1) { return flagged ? (per_lane > 4 ? 4 : 6) : 8; }

// The row loops below are grid-stride (a bounded grid), so that the flags each block folds in
// are flushed once per block, not once per row.
__device__ __forceinline__ long long row_stride() { return static_cast<long long>(gridDim.x) * kRowsPerBlock; }

// kFlagged: the instantiation that folds flags in; the other has no flag code at all. The
// launch bounds keep either at 6 (flagged; 4 with more than four elements a lane) or 8 (not)
// blocks an SM: these kernels are memory bound and need every warp in flight.
// A page row lives in registers: lane l holds columns l, l + 32, .., l + 32 (kPerLane - 1),
// loaded together (one pass over memory, kPerLane loads in flight per lane).
template <class S, class T, bool kFlagged, int kPerLane>
__global__ void __launch_bounds__(32 * kRowsPerBlock, blocks_per_sm(kFlagged, kPerLane))
    online_softmax_kernel(const S* scores, float scale, long long rows, int cols, bool first, float* row_max,
                          float* row_sum, float* factor, T* p_tilde, SoftmaxOptions o, Rescale rescale,
                          OnlineSoftmaxFlags flags) {
  FlagTap<S, kFlagged, NegativeInfinity::common> scores_flags;  // a mask's -inf
  FlagTap<T, kFlagged> p_flags;
  FlagTap<float, kFlagged> max_flags, sum_flags;
  FlagTap<float, kFlagged> before_flags, after_flags;
  for (long long row = warp_row(); row < rows; row += row_stride()) {
    const S* s = scores + row * cols;
    S raw[kPerLane];
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int c = threadIdx.x + 32 * u;
      if (c < cols) raw[u] = s[c];
    }
    const float m_prev = first ? kNegInf : row_max[row];
    float top = m_prev;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int c = threadIdx.x + 32 * u;
      if (c >= cols) continue;
      scores_flags.add(flags.scores, raw[u], row * cols + c);
      top = fmaxf(top, __fmul_rn(to_float(raw[u]), scale));
    }
    top = warp_max(top);
    const float m_use = exp_origin(top, o);
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int c = threadIdx.x + 32 * u;
      if (c >= cols) continue;
      const float p = __expf(__fmaf_rn(to_float(raw[u]), scale, -m_use));
      const T stored = from_float<T>(p);
      p_tilde[row * cols + c] = stored;
      p_flags.add(flags.p_tilde, stored, row * cols + c);
      sum += p;
    }
    sum = warp_sum(sum);
    const float r = first ? 0.0f : (o.subtract_max ? __expf(m_prev - m_use) : 1.0f);
    if (threadIdx.x == 0) {
      const float running_sum = first ? sum : __fmaf_rn(r, row_sum[row], sum);
      factor[row] = r;
      row_sum[row] = running_sum;
      row_max[row] = top;
      max_flags.add(flags.max, top, row);
      sum_flags.add(flags.sum, running_sum, row);
    }
    if (rescale.acc) {
      float* acc = rescale.acc + row * rescale.cols;
      for (int c = threadIdx.x; c < rescale.cols; c += 32) {
        const float before = acc[c], after = before * r;
        acc[c] = after;
        before_flags.add(flags.acc_before, before, row * rescale.cols + c);
        after_flags.add(flags.acc_after, after, row * rescale.cols + c);
      }
    }
  }
  scores_flags.flush(flags.scores);
  p_flags.flush(flags.p_tilde);
  max_flags.flush(flags.max);
  sum_flags.flush(flags.sum);
  before_flags.flush(flags.acc_before);
  after_flags.flush(flags.acc_after);
}

// kN consecutive elements of a row, moved as one access: 16 bytes of scores where a row is a
// whole number of 16-byte vectors (and the probabilities they become, 8 or 16 bytes), else one.
template <class E, int kN>
struct alignas(sizeof(E) * kN) Pack {
  E e[kN];
};

// Whole rows, in three passes over each (max, sum, probabilities), kN elements per access.
template <class S, class T, bool kFlagged, int kN>
__global__ void __launch_bounds__(32 * kRowsPerBlock, blocks_per_sm(kFlagged))
    row_softmax_kernel(const S* scores, float scale, long long rows, int cols, float* row_max, float* row_sum,
                       T* probs, SoftmaxOptions o, RowSoftmaxFlags flags) {
  FlagTap<S, kFlagged, NegativeInfinity::common> scores_flags;  // a mask's -inf
  FlagTap<T, kFlagged> probs_flags;
  FlagTap<float, kFlagged> max_flags, sum_flags;
  constexpr int kUnroll = kN > 1 ? (kFlagged ? 1 : 2) : 4;  // accesses in flight per lane, within the registers
  const int packs = cols / kN;
  for (long long row = warp_row(); row < rows; row += row_stride()) {
    const auto* s = reinterpret_cast<const Pack<S, kN>*>(scores + row * cols);
    float top = kNegInf;
#pragma unroll kUnroll
    for (int v = threadIdx.x; v < packs; v += 32) {
      const Pack<S, kN> x = s[v];
      scores_flags.add(flags.scores, x.e, row * cols + v * kN);
#pragma unroll
      for (int k = 0; k < kN; ++k) top = fmaxf(top, __fmul_rn(to_float(x.e[k]), scale));
    }
    top = warp_max(top);
    const float m_use = exp_origin(top, o);
    float sum = 0.0f;
#pragma unroll kUnroll
    for (int v = threadIdx.x; v < packs; v += 32) {
      const Pack<S, kN> x = s[v];
#pragma unroll
      for (int k = 0; k < kN; ++k) sum += __expf(__fmaf_rn(to_float(x.e[k]), scale, -m_use));
    }
    sum = warp_sum(sum);
    // A fully masked row: probabilities 0 (unless the guard is the fault's to drop).
    const float inv = sum > 0.0f || !o.guard_masked ? 1.0f / sum : 0.0f;
    auto* out = reinterpret_cast<Pack<T, kN>*>(probs + row * cols);
#pragma unroll kUnroll
    for (int v = threadIdx.x; v < packs; v += 32) {
      const Pack<S, kN> x = s[v];
      Pack<T, kN> p;
#pragma unroll
      for (int k = 0; k < kN; ++k) p.e[k] = from_float<T>(__fmul_rn(__expf(__fmaf_rn(to_float(x.e[k]), scale, -m_use)), inv));
      probs_flags.add(flags.probs, p.e, row * cols + v * kN);
      out[v] = p;
    }
    if (threadIdx.x == 0) {
      row_max[row] = top;
      row_sum[row] = sum;
      max_flags.add(flags.max, top, row);
      sum_flags.add(flags.sum, sum, row);
    }
  }
  scores_flags.flush(flags.scores);
  probs_flags.flush(flags.probs);
  max_flags.flush(flags.max);
  sum_flags.flush(flags.sum);
}

template <class T, bool kFlagged>
__global__ void __launch_bounds__(32 * kRowsPerBlock, blocks_per_sm(kFlagged)) normalize_rows_kernel(const float* acc, const float* row_sum, long long rows, int cols, T* out,
                                      NormalizeFlags flags) {
  FlagTap<float, kFlagged> acc_flags;
  FlagTap<T, kFlagged> out_flags;
  for (long long row = warp_row(); row < rows; row += row_stride()) {
    const float l = row_sum[row];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int c = threadIdx.x; c < cols; c += 32) {
      const float a = acc[row * cols + c];
      acc_flags.add(flags.acc, a, row * cols + c);
      const T o = from_float<T>(a * inv);
      out[row * cols + c] = o;
      out_flags.add(flags.out, o, row * cols + c);
    }
  }
  acc_flags.flush(flags.acc);
  out_flags.flush(flags.out);
}

unsigned grid_of(long long rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }
// For the grid-stride kernels: one resident wave, at the blocks an SM their launch bounds fit.
unsigned strided_grid_of(long long rows, int per_sm) {
  int device = 0, sms = 0;
  FC_CUDA(cudaGetDevice(&device));
  FC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<unsigned>(std::min<long long>(grid_of(rows), static_cast<long long>(sms) * per_sm));
}
const dim3 kBlock(32, kRowsPerBlock);

}  // namespace

void launch_apply_mask(void* scores, DType dtype, float scale, float softcap, const Shape& s, long long first_row,
                       long long rows, int j0, int cols, const DeviceMask& mask, cudaStream_t stream) {
  const int heads = static_cast<int>(s.heads), q_len = static_cast<int>(s.q_len);
  const float inverse_cap = softcap > 0 ? 1.0f / softcap : 0.0f;
  if (dtype == DType::f16) {
    apply_mask_kernel<<<grid_of(rows), kBlock, 0, stream>>>(static_cast<__half*>(scores), scale, softcap, inverse_cap,
                                                            heads, q_len, j0, cols, mask, first_row, rows);
  } else {
    apply_mask_kernel<<<grid_of(rows), kBlock, 0, stream>>>(static_cast<float*>(scores), scale, softcap, inverse_cap,
                                                            heads, q_len, j0, cols, mask, first_row, rows);
  }
  FC_CUDA_LAUNCH();
}

namespace {
// Calls f(typed scores, typed output) for the score format and the output format.
template <class F>
void with_types(const ScoreInput& scores, DType out, void* data, F&& f) {
  auto by_output = [&](auto* typed_scores) {
    if (out == DType::f16) f(typed_scores, static_cast<__half*>(data));
    else f(typed_scores, static_cast<__nv_bfloat16*>(data));
  };
  if (scores.dtype == DType::f16) by_output(static_cast<const __half*>(scores.data));
  else by_output(static_cast<const float*>(scores.data));
}

bool any(std::initializer_list<FlagSlot> slots) {
  for (const FlagSlot& s : slots) {
    if (s.counts) return true;
  }
  return false;
}

}  // namespace

void launch_online_softmax(ScoreInput scores, long long rows, int cols, bool first_page, float* row_max,
                           float* row_sum, float* factor, void* p_tilde, DType dtype, SoftmaxOptions options,
                           Rescale rescale, const OnlineSoftmaxFlags& flags, cudaStream_t stream) {
  if (cols > kMaxOnlineSoftmaxCols) {
    throw Error("online softmax: a page of " + std::to_string(cols) + " keys; at most " + std::to_string(kMaxOnlineSoftmaxCols));
  }
  const bool flagged = any({flags.scores, flags.p_tilde, flags.max, flags.sum, flags.acc_before, flags.acc_after});
  with_types(scores, dtype, p_tilde, [&](auto* s, auto* out) {
    using S = std::remove_const_t<std::remove_pointer_t<decltype(s)>>;
    using T = std::remove_pointer_t<decltype(out)>;
    auto launch = [&](auto per_lane) {
      constexpr int kPerLane = decltype(per_lane)::value;
      auto kernel = flagged ? online_softmax_kernel<S, T, true, kPerLane> : online_softmax_kernel<S, T, false, kPerLane>;
      kernel<<<strided_grid_of(rows, blocks_per_sm(flagged, kPerLane)), kBlock, 0, stream>>>(s, scores.scale, rows, cols, first_page, row_max, row_sum,
                                                           factor, out, options, rescale, flags);
    };
    if (cols <= 128) launch(std::integral_constant<int, 4>{});
    else launch(std::integral_constant<int, kMaxOnlineSoftmaxCols / 32>{});
  });
  FC_CUDA_LAUNCH();
}

void launch_row_softmax(ScoreInput scores, long long rows, int cols, float* row_max, float* row_sum, void* probs,
                        DType dtype, SoftmaxOptions options, const RowSoftmaxFlags& flags, cudaStream_t stream) {
  const bool flagged = any({flags.scores, flags.probs, flags.max, flags.sum});
  with_types(scores, dtype, probs, [&](auto* s, auto* out) {
    using S = std::remove_const_t<std::remove_pointer_t<decltype(s)>>;
    using T = std::remove_pointer_t<decltype(out)>;
    constexpr int kVector = 16 / sizeof(S);
    const bool whole_vectors = cols % kVector == 0 && reinterpret_cast<std::uintptr_t>(s) % 16 == 0 &&
                               reinterpret_cast<std::uintptr_t>(out) % (sizeof(T) * kVector) == 0;
    auto launch = [&](auto elements) {
      constexpr int kN = decltype(elements)::value;
      auto kernel = flagged ? row_softmax_kernel<S, T, true, kN> : row_softmax_kernel<S, T, false, kN>;
      kernel<<<strided_grid_of(rows, blocks_per_sm(flagged)), kBlock, 0, stream>>>(s, scores.scale, rows, cols, row_max, row_sum, out,
                                                                    options, flags);
    };
    if (whole_vectors) launch(std::integral_constant<int, kVector>{});
    else launch(std::integral_constant<int, 1>{});
  });
  FC_CUDA_LAUNCH();
}

void launch_normalize_rows(const float* acc, const float* row_sum, long long rows, int cols, void* out, DType dtype,
                           const NormalizeFlags& flags, cudaStream_t stream) {
  const bool flagged = any({flags.acc, flags.out});
  auto launch = [&](auto* typed_out) {
    using T = std::remove_pointer_t<decltype(typed_out)>;
    auto kernel = flagged ? normalize_rows_kernel<T, true> : normalize_rows_kernel<T, false>;
    kernel<<<strided_grid_of(rows, blocks_per_sm(flagged)), kBlock, 0, stream>>>(acc, row_sum, rows, cols, typed_out, flags);
  };
  if (dtype == DType::f16) launch(static_cast<__half*>(out));
  else launch(static_cast<__nv_bfloat16*>(out));
  FC_CUDA_LAUNCH();
}

}  // namespace fc

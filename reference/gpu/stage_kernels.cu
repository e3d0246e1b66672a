#include "reference/gpu/stage_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/check.h"
#include "reference/gpu/thread_pool.h"

namespace fc::gpu {
namespace {

using stage_math::RowIn;
using stage_math::RowOut;

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

// A warp cooperating on one row (stage_math.h, Team): lane c handles columns c, c + 32, ...
struct WarpTeam {
  int lane;
  __device__ int rank() const { return lane; }
  __device__ int size() const { return 32; }
  __device__ bool leader() const { return lane == 0; }
  __device__ double sum(double x) const {
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
  }
  __device__ double max(double x) const {
    // nan_max is symmetric (NaN from either side), so every lane ends with the same value.
    for (int offset = 16; offset > 0; offset /= 2) x = stage_math::nan_max(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
  }
};

// The whole block cooperating on one row, for long rows (a warp a row leaves most of the
// device idle when a block of rows is a few hundred): lane sums within each warp, then the
// warps' sums in warp order, which every thread reads alike. Every thread of the block makes
// every reduction (stage_math's row functions call them in uniform control flow).
struct BlockTeam {
  double* scratch;  // shared, one entry per warp
  __device__ int rank() const { return static_cast<int>(threadIdx.x); }
  __device__ int size() const { return static_cast<int>(blockDim.x); }
  __device__ bool leader() const { return threadIdx.x == 0; }
  template <class Op>
  __device__ double reduce(double x, Op op) const {
    for (int offset = 16; offset > 0; offset /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, offset));
    __syncthreads();  // the previous reduction's reads of scratch are done
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
    __syncthreads();
    double r = scratch[0];
    for (unsigned w = 1; w < blockDim.x / 32; ++w) r = op(r, scratch[w]);
    return r;
  }
  __device__ double sum(double x) const {
    return reduce(x, [](double a, double b) { return a + b; });
  }
  __device__ double max(double x) const {
    return reduce(x, [](double a, double b) { return stage_math::nan_max(a, b); });
  }
};

// Rows at least this long are reduced by a block rather than a warp.
constexpr std::int64_t kBlockRowCols = 512;

// A row's team and its row: TeamKind is WarpTeam (kRowsPerBlock rows a block) or BlockTeam
// (a row a block); -1 past the last row.
template <class TeamKind>
struct RowTeam;
template <>
struct RowTeam<WarpTeam> {
  static unsigned blocks(std::int64_t rows) {
    return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  }
  __device__ static WarpTeam team() { return WarpTeam{static_cast<int>(threadIdx.x % 32)}; }
  __device__ static std::int64_t row(std::int64_t rows) {
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    return r < rows ? r : -1;
  }
};
template <>
struct RowTeam<BlockTeam> {
  static unsigned blocks(std::int64_t rows) { return static_cast<unsigned>(rows); }
  __device__ static BlockTeam team() {
    __shared__ double scratch[kThreads / 32];
    return BlockTeam{scratch};
  }
  __device__ static std::int64_t row(std::int64_t) { return blockIdx.x; }
};

// Base pointers of a bounded matrix; its row r for the shared math.
// Null bounds: an exact tensor (stage_math.h, RowIn).
struct BoundedIn {
  const double *value, *bound, *tight;
  std::int64_t cols;
  __device__ RowIn row(std::int64_t r) const {
    if (!bound) return {value + r * cols, {nullptr, nullptr}};
    return {value + r * cols, {bound + r * cols, tight + r * cols}};
  }
};
struct BoundedOut {
  double *value, *bound, *tight;
  std::int64_t cols;
  __device__ RowOut row(std::int64_t r) const {
    return {value + r * cols, {bound + r * cols, tight + r * cols}};
  }
};
BoundedIn in(const DeviceBounded& b) { return {b.value.data(), b.bound.data(), b.tight.data(), b.value.cols()}; }
BoundedOut out(DeviceBounded& b) { return {b.value.data(), b.bound.data(), b.tight.data(), b.value.cols()}; }

unsigned element_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535 * 8));
}
unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// The row this warp handles, or -1 past the last.
__device__ std::int64_t warp_row(std::int64_t rows) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  return r < rows ? r : -1;
}

#define FC_GRID_STRIDE(i, n) \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

__global__ void nominal_kernel(const double* x, std::int64_t n, double floor, double* out) {
  FC_GRID_STRIDE(i, n) {
    const double a = fabs(x[i]);
    out[i] = floor > 0 && x[i] != 0 ? stage_math::larger(a, floor) : a;
  }
}

// Formats as widen_kernel reads them: 0 fp16, 1 bf16, 2 fp32, 3 fp64.
__global__ void widen_kernel(const void* raw, int format, std::int64_t n, double scale, double* out) {
  FC_GRID_STRIDE(i, n) {
    double x;
    switch (format) {
      case 0: x = __half2float(__ushort_as_half(static_cast<const unsigned short*>(raw)[i])); break;
      case 1: x = __bfloat162float(__ushort_as_bfloat16(static_cast<const unsigned short*>(raw)[i])); break;
      case 2: x = static_cast<const float*>(raw)[i]; break;
      default: x = static_cast<const double*>(raw)[i];
    }
    out[i] = x * scale;
  }
}

// A block a column: its threads sum strided rows, then the block folds them.
__global__ void column_sums_kernel(const double* v, std::int64_t cols, std::int64_t count, double eta, double* floor,
                                   double* norm) {
  __shared__ double scratch[kThreads / 32];
  const BlockTeam team{scratch};
  const std::int64_t c = blockIdx.x;
  double absolute = 0, squares = 0;
  for (std::int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    const double x = v[r * cols + c];
    absolute += fabs(x);
    squares += x * x;
  }
  absolute = team.sum(absolute);
  squares = team.sum(squares);
  if (team.leader()) {
    floor[c] = eta * absolute;
    norm[c] = sqrt(squares);
  }
}

__global__ void square_kernel(const double* x, std::int64_t n, double* out) {
  FC_GRID_STRIDE(i, n) out[i] = x[i] * x[i];
}

__global__ void add_kernel(double* into, const double* x, std::int64_t n) {
  FC_GRID_STRIDE(i, n) into[i] += x[i];
}

__global__ void prefix_scan_kernel(const double* value_blocks, const double* nominal_blocks, std::int64_t blocks,
                                   std::int64_t n, double* value, double* accumulated, double* reach) {
  FC_GRID_STRIDE(i, n) {
    double v = value[i], sum = fabs(v), top = sum;
    for (std::int64_t j = 0; j < blocks; ++j) {
      const double nominal = nominal_blocks[j * n + i];
      top = stage_math::larger(top, fabs(v) + nominal);
      sum += nominal;
      v += value_blocks[j * n + i];
    }
    value[i] = v;
    accumulated[i] = sum;
    reach[i] = stage_math::larger(top, fabs(v));
  }
}

__global__ void mask_bias_kernel(HeadMask mask, const double* rows, std::int64_t first_row, const double* dense,
                                 std::int64_t n_rows, std::int64_t keys, double* out) {
  FC_GRID_STRIDE(i, n_rows * keys) {
    const std::int64_t r = i / keys, j = i % keys;
    out[i] = mask.bias(rows ? static_cast<std::int64_t>(rows[r]) : first_row + r, j, dense ? dense[i] : 0.0);
  }
}

__global__ void qk_kernel(const double* t, const double* magnitude, const double* bias, std::int64_t bias_cols,
                          std::int64_t col_begin, std::int64_t rows, std::int64_t cols, stage_math::QkTerms terms,
                          BoundedOut o) {
  FC_GRID_STRIDE(i, rows * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    stage_math::qk_element(t[i], magnitude[i], bias[r * bias_cols + col_begin + c], terms, o.value + i, o.bound + i,
                           o.tight + i);
  }
}

template <class TeamKind>
__global__ void softmax_kernel(BoundedIn s, std::int64_t rows, BoundedOut p, BoundedOut max, BoundedOut sum,
                               stage_math::OutputTerms terms) {
  const std::int64_t r = RowTeam<TeamKind>::row(rows);
  if (r < 0) return;
  stage_math::softmax_row(RowTeam<TeamKind>::team(), s.cols, s.row(r), p.row(r), max.row(r), sum.row(r), terms);
}

template <class TeamKind>
__global__ void online_softmax_kernel(BoundedIn s, BoundedIn prev_max, BoundedIn prev_sum, std::int64_t rows,
                                      BoundedOut p, BoundedOut max, BoundedOut sum, BoundedOut rescale,
                                      stage_math::OutputTerms terms) {
  const std::int64_t r = RowTeam<TeamKind>::row(rows);
  if (r < 0) return;
  stage_math::online_softmax_row(RowTeam<TeamKind>::team(), s.cols, s.row(r), prev_max.row(r), prev_sum.row(r),
                                 p.row(r), max.row(r), sum.row(r), rescale.row(r), terms);
}

__global__ void rescale_kernel(BoundedIn acc, BoundedIn prev_max, BoundedIn new_max, std::int64_t rows, BoundedOut o,
                               stage_math::OutputTerms terms) {
  const std::int64_t r = warp_row(rows);
  if (r < 0) return;
  stage_math::rescale_row(WarpTeam{static_cast<int>(threadIdx.x % 32)}, acc.cols, acc.row(r), prev_max.row(r),
                          new_max.row(r), o.row(r), terms);
}

struct PvPointers {
  const double *value, *accumulated, *reach, *magnitude, *worst, *tight, *squares, *operand_floor, *v_norm;
};

__global__ void pv_kernel(PvPointers x, std::int64_t rows, std::int64_t cols, stage_math::PvTerms terms, double* bound,
                          double* tight) {
  FC_GRID_STRIDE(i, rows * cols) {
    const std::int64_t c = i % cols;
    const stage_math::PvElement e{x.value[i],
                                  x.accumulated[i],
                                  x.reach[i],
                                  x.magnitude[i],
                                  {x.worst[i], x.tight[i]},
                                  x.squares ? x.squares[i] : 0.0,
                                  x.operand_floor[c],
                                  x.v_norm ? x.v_norm[c] : 0.0};
    stage_math::pv_element(e, terms, bound + i, tight + i);
  }
}

__global__ void normalize_kernel(BoundedIn acc, BoundedIn sum, std::int64_t rows, BoundedOut o,
                                 stage_math::OutputTerms terms) {
  const std::int64_t r = warp_row(rows);
  if (r < 0) return;
  stage_math::normalize_row(WarpTeam{static_cast<int>(threadIdx.x % 32)}, acc.cols, acc.row(r), sum.row(r), o.row(r),
                            terms);
}

__global__ void lse_kernel(BoundedIn max, BoundedIn sum, std::int64_t rows, BoundedOut o,
                           stage_math::OutputTerms terms) {
  FC_GRID_STRIDE(r, rows) stage_math::lse_element(max.row(r), sum.row(r), o.row(r), terms);
}

__global__ void combine_kernel(const BoundedIn* parts, const BoundedIn* lses, int splits, std::int64_t rows,
                               BoundedOut o, stage_math::OutputTerms terms) {
  const std::int64_t r = warp_row(rows);
  if (r < 0) return;
  stage_math::combine_row(
      WarpTeam{static_cast<int>(threadIdx.x % 32)}, o.cols, splits, [&](int t) { return parts[t].row(r); },
      [&](int t) { return lses[t].row(r); }, o.row(r), terms);
}

__global__ void combine_lse_kernel(const BoundedIn* lses, int splits, std::int64_t rows, BoundedOut o,
                                   stage_math::OutputTerms terms) {
  FC_GRID_STRIDE(r, rows) {
    stage_math::combine_lse_element(splits, [&](int t) { return lses[t].row(r); }, o.row(r), terms);
  }
}

// The splits' base pointers on the device, for the combine kernels; freed stream-ordered.
class SplitTable {
 public:
  SplitTable(const std::vector<const DeviceBounded*>& parts, cudaStream_t stream) : stream_(stream) {
    std::vector<BoundedIn> host;
    for (const DeviceBounded* p : parts) host.push_back(in(*p));
    data_ = static_cast<BoundedIn*>(allocate_async(host.size() * sizeof(BoundedIn), stream));
    FC_CUDA(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(BoundedIn), cudaMemcpyHostToDevice, stream));
    // The host vector goes out of scope before the copy may have run.
    FC_CUDA(cudaStreamSynchronize(stream));
  }
  ~SplitTable() { cudaFreeAsync(data_, stream_); }
  SplitTable(const SplitTable&) = delete;
  SplitTable& operator=(const SplitTable&) = delete;
  const BoundedIn* get() const { return data_; }

 private:
  BoundedIn* data_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace

void nominal(const DeviceMatrix& x, double floor, DeviceMatrix& o, cudaStream_t stream) {
  if (x.size() == 0) return;
  nominal_kernel<<<element_blocks(x.size()), kThreads, 0, stream>>>(x.data(), x.size(), floor, o.data());
  FC_CUDA_LAUNCH();
}

bool widens(DType t) { return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64; }

void widen(const void* data, Memory where, DType t, std::int64_t n, double scale, double* out, cudaStream_t stream) {
  if (!widens(t)) throw Error(std::string("gpu reference: cannot widen ") + dtype_name(t));
  if (n == 0) return;
  const int format = t == DType::f16 ? 0 : t == DType::bf16 ? 1 : t == DType::f32 ? 2 : 3;
  if (where == Memory::device) {
    widen_kernel<<<element_blocks(n), kThreads, 0, stream>>>(data, format, n, scale, out);
    FC_CUDA_LAUNCH();
    return;
  }
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(t);
  void* const raw = allocate_async(bytes, stream);
  const cudaError_t copied = cudaMemcpyAsync(raw, data, bytes, cudaMemcpyHostToDevice, stream);
  if (copied == cudaSuccess) widen_kernel<<<element_blocks(n), kThreads, 0, stream>>>(raw, format, n, scale, out);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t freed = cudaFreeAsync(raw, stream);
  FC_CUDA(copied);
  FC_CUDA(launched);
  FC_CUDA(freed);
}

void square(const DeviceMatrix& x, DeviceMatrix& o, cudaStream_t stream) {
  if (x.size() == 0) return;
  square_kernel<<<element_blocks(x.size()), kThreads, 0, stream>>>(x.data(), x.size(), o.data());
  FC_CUDA_LAUNCH();
}

void add(DeviceMatrix& into, const DeviceMatrix& x, cudaStream_t stream) {
  if (x.size() == 0) return;
  add_kernel<<<element_blocks(x.size()), kThreads, 0, stream>>>(into.data(), x.data(), x.size());
  FC_CUDA_LAUNCH();
}

void prefix_scan(const double* value_blocks, const double* nominal_blocks, std::int64_t blocks, DeviceMatrix& value,
                 DeviceMatrix& accumulated, DeviceMatrix& reach, cudaStream_t stream) {
  if (value.size() == 0) return;
  prefix_scan_kernel<<<element_blocks(value.size()), kThreads, 0, stream>>>(
      value_blocks, nominal_blocks, blocks, value.size(), value.data(), accumulated.data(), reach.data());
  FC_CUDA_LAUNCH();
}

void column_sums(const DeviceMatrix& v, std::int64_t first, std::int64_t count, double eta, DeviceMatrix& floor,
                 DeviceMatrix& norm, cudaStream_t stream) {
  if (v.cols() == 0) return;
  column_sums_kernel<<<static_cast<unsigned>(v.cols()), kThreads, 0, stream>>>(v.row(first), v.cols(), count, eta,
                                                                              floor.data(), norm.data());
  FC_CUDA_LAUNCH();
}

void mask_bias(const HeadMask& mask, const DeviceMatrix* rows, std::int64_t first_row, const DeviceMatrix* dense,
               DeviceMatrix& o, cudaStream_t stream) {
  if (o.size() == 0) return;
  mask_bias_kernel<<<element_blocks(o.size()), kThreads, 0, stream>>>(
      mask, rows ? rows->data() : nullptr, first_row, dense ? dense->data() : nullptr, o.rows(), o.cols(), o.data());
  FC_CUDA_LAUNCH();
}

void qk_elements(const DeviceMatrix& t, const DeviceMatrix& magnitude, const DeviceMatrix& bias, std::int64_t col_begin,
                 const stage_math::QkTerms& terms, DeviceBounded& o, cudaStream_t stream) {
  if (t.size() == 0) return;
  qk_kernel<<<element_blocks(t.size()), kThreads, 0, stream>>>(t.data(), magnitude.data(), bias.data(), bias.cols(),
                                                               col_begin, t.rows(), t.cols(), terms, out(o));
  FC_CUDA_LAUNCH();
}

void softmax_rows(const DeviceBounded& scores, DeviceBounded& p, DeviceBounded& max, DeviceBounded& sum,
                  const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = scores.value.rows();
  if (rows == 0) return;
  if (scores.value.cols() >= kBlockRowCols) {
    softmax_kernel<BlockTeam><<<RowTeam<BlockTeam>::blocks(rows), kThreads, 0, stream>>>(in(scores), rows, out(p),
                                                                                        out(max), out(sum), terms);
  } else {
    softmax_kernel<WarpTeam><<<RowTeam<WarpTeam>::blocks(rows), kThreads, 0, stream>>>(in(scores), rows, out(p),
                                                                                      out(max), out(sum), terms);
  }
  FC_CUDA_LAUNCH();
}

void online_softmax_rows(const DeviceBounded& scores, const DeviceBounded& prev_max, const DeviceBounded& prev_sum,
                         DeviceBounded& p, DeviceBounded& max, DeviceBounded& sum, DeviceBounded& rescale,
                         const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = scores.value.rows();
  if (rows == 0) return;
  if (scores.value.cols() >= kBlockRowCols) {
    online_softmax_kernel<BlockTeam><<<RowTeam<BlockTeam>::blocks(rows), kThreads, 0, stream>>>(
        in(scores), in(prev_max), in(prev_sum), rows, out(p), out(max), out(sum), out(rescale), terms);
  } else {
    online_softmax_kernel<WarpTeam><<<RowTeam<WarpTeam>::blocks(rows), kThreads, 0, stream>>>(
        in(scores), in(prev_max), in(prev_sum), rows, out(p), out(max), out(sum), out(rescale), terms);
  }
  FC_CUDA_LAUNCH();
}

void rescale_rows(const DeviceBounded& acc, const DeviceBounded& prev_max, const DeviceBounded& new_max,
                  DeviceBounded& o, const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = acc.value.rows();
  if (rows == 0) return;
  rescale_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(in(acc), in(prev_max), in(new_max), rows, out(o), terms);
  FC_CUDA_LAUNCH();
}

void pv_elements(const PvInputs& x, const stage_math::PvTerms& terms, DeviceBounded& o, cudaStream_t stream) {
  const std::int64_t rows = x.value->rows(), cols = x.value->cols();
  if (rows * cols == 0) return;
  const PvPointers p{x.value->data(),
                     x.accumulated->data(),
                     x.reach->data(),
                     x.magnitude->data(),
                     x.propagated_worst->data(),
                     x.propagated_tight->data(),
                     x.squares ? x.squares->data() : nullptr,
                     x.operand_floor->data(),
                     x.v_norm ? x.v_norm->data() : nullptr};
  pv_kernel<<<element_blocks(rows * cols), kThreads, 0, stream>>>(p, rows, cols, terms, o.bound.data(),
                                                                  o.tight.data());
  FC_CUDA_LAUNCH();
}

void normalize_rows(const DeviceBounded& acc, const DeviceBounded& sum, DeviceBounded& o,
                    const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = acc.value.rows();
  if (rows == 0) return;
  normalize_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(in(acc), in(sum), rows, out(o), terms);
  FC_CUDA_LAUNCH();
}

void lse_rows(const DeviceBounded& max, const DeviceBounded& sum, DeviceBounded& o,
              const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = max.value.rows();
  if (rows == 0) return;
  lse_kernel<<<element_blocks(rows), kThreads, 0, stream>>>(in(max), in(sum), rows, out(o), terms);
  FC_CUDA_LAUNCH();
}

void combine_rows(const std::vector<const DeviceBounded*>& outs, const std::vector<const DeviceBounded*>& lses,
                  DeviceBounded& o, const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = o.value.rows();
  if (rows == 0) return;
  const SplitTable parts(outs, stream), lse_table(lses, stream);
  combine_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(parts.get(), lse_table.get(), static_cast<int>(outs.size()),
                                                            rows, out(o), terms);
  FC_CUDA_LAUNCH();
}

void combine_lse_rows(const std::vector<const DeviceBounded*>& lses, DeviceBounded& o,
                      const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = o.value.rows();
  if (rows == 0) return;
  const SplitTable lse_table(lses, stream);
  combine_lse_kernel<<<element_blocks(rows), kThreads, 0, stream>>>(lse_table.get(), static_cast<int>(lses.size()),
                                                                    rows, out(o), terms);
  FC_CUDA_LAUNCH();
}

}  // namespace fc::gpu

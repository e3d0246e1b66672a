#include "reference/gpu/stage_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "core/check.h"
#include "reference/gpu/row_teams.cuh"
#include "reference/gpu/thread_pool.h"

namespace fc::gpu {
namespace {

__global__ void nominal_kernel(const double* x, std::int64_t n, double floor, double* out) {
  FC_GRID_STRIDE(i, n) {
    const double a = fabs(x[i]);
    out[i] = floor > 0 && x[i] != 0 ? stage_math::larger(a, floor) : a;
  }
}

// Formats as widened_at reads them: 0 fp16, 1 bf16, 2 fp32, 3 fp64.
__device__ double widened_at(const void* raw, int format, std::int64_t i) {
  switch (format) {
    case 0: return __half2float(__ushort_as_half(static_cast<const unsigned short*>(raw)[i]));
    case 1: return __bfloat162float(__ushort_as_bfloat16(static_cast<const unsigned short*>(raw)[i]));
    case 2: return static_cast<const float*>(raw)[i];
    default: return static_cast<const double*>(raw)[i];
  }
}

__global__ void widen_kernel(const void* raw, int format, std::int64_t n, double scale, double* out) {
  FC_GRID_STRIDE(i, n) out[i] = widened_at(raw, format, i) * scale;
}

// Element i of the stack: tensor i / each, row r of its `each` / cols, as stored at rows[r]
// (or first + r when rows is null).
__global__ void widen_each_kernel(const void* const* sources, const std::int64_t* rows, int format, std::int64_t first,
                                  std::int64_t cols, std::int64_t each, std::int64_t n, double scale, double* out) {
  FC_GRID_STRIDE(i, n) {
    const std::int64_t at = i % each, r = at / cols;
    const std::int64_t row = rows ? rows[r] : first + r;
    out[i] = widened_at(sources[i / each], format, row * cols + at % cols) * scale;
  }
}

// A block a (column, tile): its threads sum strided rows, then the block folds them.
__global__ void column_sums_kernel(const double* v, std::int64_t cols, std::int64_t count, std::int64_t stride,
                                   double eta, double* floor, double* norm) {
  __shared__ double scratch[kThreads / 32];
  const BlockTeam team{scratch};
  const std::int64_t c = blockIdx.x, t = blockIdx.y;
  const double* tile = v + t * stride * cols;
  double absolute = 0, squares = 0;
  for (std::int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    const double x = tile[r * cols + c];
    absolute += fabs(x);
    squares += x * x;
  }
  absolute = team.sum(absolute);
  squares = team.sum(squares);
  if (team.leader()) {
    floor[t * cols + c] = eta * absolute;
    norm[t * cols + c] = sqrt(squares);
  }
}

// A block a column of v's rows [0, count): its least and greatest value (2 x cols).
__global__ void column_range_kernel(const double* v, std::int64_t cols, std::int64_t count, double* range) {
  __shared__ double scratch[kThreads / 32];
  const BlockTeam team{scratch};
  const std::int64_t c = blockIdx.x;
  double least = stage_math::infinity(), greatest = -stage_math::infinity();
  for (std::int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    const double x = v[r * cols + c];
    least = stage_math::smaller(least, x);
    greatest = stage_math::larger(greatest, x);
  }
  least = -team.max(-least);
  greatest = team.max(greatest);
  if (team.leader()) {
    range[c] = least;
    range[cols + c] = greatest;
  }
}

__global__ void range_cap_kernel(const double* range, std::int64_t rows, std::int64_t cols, const double* value,
                                 const double* bound, const double* tight, stage_math::RangeTerms terms,
                                 BoundedOut o) {
  FC_GRID_STRIDE(i, rows * cols) {
    const std::int64_t c = i % cols;
    const double cap = stage_math::range_cap(value[i], range[c], range[cols + c], terms);
    o.value[i] = value[i];
    o.bound[i] = stage_math::smaller(bound[i], cap);
    o.tight[i] = stage_math::smaller(tight[i], cap);
  }
}

__global__ void square_kernel(const double* x, std::int64_t n, double* out) {
  FC_GRID_STRIDE(i, n) out[i] = x[i] * x[i];
}

__global__ void add_kernel(double* into, const double* x, std::int64_t n) {
  FC_GRID_STRIDE(i, n) into[i] += x[i];
}

__global__ void mask_bias_kernel(HeadMask mask, const double* rows, std::int64_t first_row, const double* dense,
                                 std::int64_t n_rows, std::int64_t keys, double* out) {
  FC_GRID_STRIDE(i, n_rows * keys) {
    const std::int64_t r = i / keys, j = i % keys;
    out[i] = mask.bias(rows ? static_cast<std::int64_t>(rows[r]) : first_row + r, j, dense ? dense[i] : 0.0);
  }
}

__global__ void qk_kernel(const double* t, const double* magnitude, const double* bias, std::int64_t bias_cols,
                          std::int64_t col_begin, TileStack stack, std::int64_t rows, std::int64_t cols,
                          stage_math::QkTerms terms, BoundedOut o) {
  FC_GRID_STRIDE(i, rows * cols) {
    const std::int64_t r = i / cols, c = i % cols, tile = r / stack.rows_per_tile;
    const double b = bias[(r % stack.rows_per_tile) * bias_cols + col_begin + tile * stack.key_stride + c];
    stage_math::qk_element(t[i], magnitude[i], b, terms, o.value + i, o.bound + i, o.tight + i);
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

// A table of values a kernel reads (pointers, row indices), copied to the device and freed
// stream-ordered.
template <class T>
class DeviceTable {
 public:
  DeviceTable(const std::vector<T>& host, cudaStream_t stream) : stream_(stream) {
    if (host.empty()) return;
    data_ = static_cast<T*>(allocate_async(host.size() * sizeof(T), stream));
    // From pageable memory: staged before the call returns, so the host vector may go then
    // (as widen's host sources do), with no wait for the stream.
    FC_CUDA(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  ~DeviceTable() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;
  const T* get() const { return data_; }

 private:
  T* data_ = nullptr;
  cudaStream_t stream_;
};

// The splits' base pointers, for the combine kernels.
DeviceTable<BoundedIn> split_table(const std::vector<const DeviceBounded*>& parts, cudaStream_t stream) {
  std::vector<BoundedIn> host;
  for (const DeviceBounded* p : parts) host.push_back(in(*p));
  return DeviceTable<BoundedIn>(host, stream);
}

}  // namespace

void nominal(const DeviceMatrix& x, double floor, DeviceMatrix& o, cudaStream_t stream) {
  if (x.size() == 0) return;
  nominal_kernel<<<element_blocks(x.size()), kThreads, 0, stream>>>(x.data(), x.size(), floor, o.data());
  FC_CUDA_LAUNCH();
}

bool widens(DType t) { return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64; }

int format_code(DType t) {
  switch (t) {
    case DType::f16: return 0;
    case DType::bf16: return 1;
    case DType::f32: return 2;
    case DType::f64: return 3;
    default: throw Error(std::string("gpu reference: no device format for ") + dtype_name(t));
  }
}

void widen(const void* data, Memory where, DType t, std::int64_t n, double scale, double* out, cudaStream_t stream) {
  if (!widens(t)) throw Error(std::string("gpu reference: cannot widen ") + dtype_name(t));
  if (n == 0) return;
  const int format = format_code(t);
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

namespace {

// widen_rows_each: rows [first, first + count) of each source, or the rows `listed` (count of
// them) when given.
void widen_stack(const std::vector<const void*>& sources, DType t, std::int64_t first, std::int64_t count,
                 const std::vector<std::int64_t>* listed, std::int64_t cols, double scale, double* out,
                 cudaStream_t stream) {
  if (!widens(t)) throw Error(std::string("gpu reference: cannot widen ") + dtype_name(t));
  const std::int64_t each = count * cols, n = each * static_cast<std::int64_t>(sources.size());
  if (n == 0) return;
  if (sources.size() == 1 && !listed) {  // one run of rows: no table
    widen(static_cast<const unsigned char*>(sources[0]) + static_cast<std::size_t>(first * cols) * dtype_size(t),
          Memory::device, t, each, scale, out, stream);
    return;
  }
  const DeviceTable<const void*> table(sources, stream);
  const std::optional<DeviceTable<std::int64_t>> rows =
      listed ? std::optional<DeviceTable<std::int64_t>>(std::in_place, *listed, stream) : std::nullopt;
  widen_each_kernel<<<element_blocks(n), kThreads, 0, stream>>>(table.get(), rows ? rows->get() : nullptr,
                                                               format_code(t), first, cols, each, n, scale, out);
  FC_CUDA_LAUNCH();
}

}  // namespace

void widen_rows_each(const std::vector<const void*>& sources, DType t, std::int64_t first, std::int64_t count,
                     std::int64_t cols, double scale, double* out, cudaStream_t stream) {
  widen_stack(sources, t, first, count, nullptr, cols, scale, out, stream);
}

void widen_rows_each(const std::vector<const void*>& sources, DType t, const std::vector<std::int64_t>& rows,
                     std::int64_t cols, double scale, double* out, cudaStream_t stream) {
  widen_stack(sources, t, 0, static_cast<std::int64_t>(rows.size()), &rows, cols, scale, out, stream);
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

void column_sums(const DeviceMatrix& v, std::int64_t first, std::int64_t count, std::int64_t tiles,
                 std::int64_t stride, double eta, DeviceMatrix& floor, DeviceMatrix& norm, cudaStream_t stream) {
  if (v.cols() == 0 || tiles == 0) return;
  for (std::int64_t t = 0; t < tiles; t += 65535) {  // at most 65535 tiles a launch (a grid's y extent)
    const dim3 grid(static_cast<unsigned>(v.cols()), static_cast<unsigned>(std::min<std::int64_t>(65535, tiles - t)));
    column_sums_kernel<<<grid, kThreads, 0, stream>>>(v.row(first + t * stride), v.cols(), count, stride, eta,
                                                      floor.row(t), norm.row(t));
    FC_CUDA_LAUNCH();
  }
}

void cap_to_value_range(const DeviceBounded& x, const DeviceMatrix& v, std::int64_t first, std::int64_t count,
                        DeviceBounded& o, const stage_math::RangeTerms& terms, cudaStream_t stream) {
  if (x.value.size() == 0) return;
  DeviceMatrix range(2, v.cols(), stream);
  column_range_kernel<<<static_cast<unsigned>(v.cols()), kThreads, 0, stream>>>(v.row(first), v.cols(), count,
                                                                                range.data());
  FC_CUDA_LAUNCH();
  range_cap_kernel<<<element_blocks(x.value.size()), kThreads, 0, stream>>>(
      range.data(), x.value.rows(), x.value.cols(), x.value.data(), x.bound.data(), x.tight.data(), terms, out(o));
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
                 const TileStack& stack, const stage_math::QkTerms& terms, DeviceBounded& o, cudaStream_t stream) {
  if (t.size() == 0) return;
  if (stack.rows_per_tile * stack.tiles != t.rows()) throw Error("gpu reference: a stack of scores of the wrong size");
  qk_kernel<<<element_blocks(t.size()), kThreads, 0, stream>>>(t.data(), magnitude.data(), bias.data(), bias.cols(),
                                                               col_begin, stack, t.rows(), t.cols(), terms, out(o));
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
  const DeviceTable<BoundedIn> parts = split_table(outs, stream), lse_table = split_table(lses, stream);
  combine_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(parts.get(), lse_table.get(), static_cast<int>(outs.size()),
                                                            rows, out(o), terms);
  FC_CUDA_LAUNCH();
}

void combine_lse_rows(const std::vector<const DeviceBounded*>& lses, DeviceBounded& o,
                      const stage_math::OutputTerms& terms, cudaStream_t stream) {
  const std::int64_t rows = o.value.rows();
  if (rows == 0) return;
  const DeviceTable<BoundedIn> lse_table = split_table(lses, stream);
  combine_lse_kernel<<<element_blocks(rows), kThreads, 0, stream>>>(lse_table.get(), static_cast<int>(lses.size()),
                                                                    rows, out(o), terms);
  FC_CUDA_LAUNCH();
}

}  // namespace fc::gpu

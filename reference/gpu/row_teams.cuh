#pragma once
// What the GPU reference's row kernels share: the teams that process one row of the shared
// stage math (reference/stage_math.h, Team) on the device, and a bounded matrix's rows as
// that math reads and writes them. Included by .cu files only.
#include "reference/gpu/device_matrix.h"
#include "reference/stage_math.h"

namespace fc::gpu {
namespace {  // each kernel file its own copy: these are all inline device code

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

}  // namespace
}  // namespace fc::gpu

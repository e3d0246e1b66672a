#include "reference/gpu/gpu_evaluator.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "reference/gpu/head_evaluator.h"

namespace fc {
namespace gpu {

std::optional<std::int64_t> first_of_consecutive(const std::vector<std::int64_t>& rows) {
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i] != rows[0] + static_cast<std::int64_t>(i)) return std::nullopt;
  }
  return rows.empty() ? 0 : rows[0];
}

DeviceMatrix form_bias(const HeadInputs& in, cudaStream_t s) {
  if (!in.masked_rows || in.bias.size() > 0) return gpu::upload(in.bias, s);
  const MaskedRows& m = *in.masked_rows;
  const std::int64_t rows = in.q.rows(), keys = in.k().rows();
  const std::optional<std::int64_t> first = first_of_consecutive(m.rows);
  DeviceMatrix dense;
  if (m.mask.dense) {
    if (first && gpu::widens(m.dense->dtype()) && m.mask.dense_row_stride == keys) {
      dense = DeviceMatrix(rows, keys, s);
      const auto* stored = static_cast<const unsigned char*>(m.dense->data()) +
                           static_cast<std::size_t>(m.mask.dense_index(*first, 0)) * dtype_size(m.dense->dtype());
      gpu::widen(stored, gpu::Memory::host, m.dense->dtype(), rows * keys, 1.0, dense.data(), s);
    } else {
      MatrixR values(rows, keys);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < keys; ++j) values(r, j) = m.dense_value(r, j);
      }
      dense = gpu::upload(values, s);
    }
  }
  DeviceMatrix row_indices;  // exact as doubles (below 2^53)
  if (!first) {
    MatrixR indices(1, rows);
    for (std::int64_t r = 0; r < rows; ++r) indices(0, r) = static_cast<double>(m.rows[static_cast<std::size_t>(r)]);
    row_indices = gpu::upload(indices, s);
  }
  DeviceMatrix bias(rows, keys, s);
  gpu::mask_bias(m.mask, first ? nullptr : &row_indices, first.value_or(0), m.mask.dense ? &dense : nullptr, bias, s);
  return bias;
}

}  // namespace gpu

namespace {

using gpu::GpuHeadEvaluator;
using gpu::ThreadContext;

// Heads (blocks of rows) evaluated at once, each on its own stream and memory pool. On the H100
// box (2026-11-27), wmma-fused 1,4,65536 (blocks of 128 rows and 1024 tiles, whose chain
// kernels walk the tiles row by row and leave the device mostly idle) took 37.1 s with 4 and
// 25.6 s with 8 (21.1 s once a head's blocks shared K and V); with 16 it ran past 180 s at 32 GB
// of host memory, by every sign its captures copied to the host under the keep rule mended
// since (session.cpp), and was not tried again. (Earlier, before tiles were judged as stacks,
// wmma-fused 1,4,16384 took 22.7 s with 4, 27.9 s with 8 and 31.8 s with 16.) Fewer where
// eight blocks' working set would take more than half the device (concurrent_blocks).
constexpr int kConcurrentHeads = 8;
// Rows x keys of a block: 64 MiB an FP64 tensor, a GiB or so of them a block in flight; four
// times the host's, so that a block's launches and GEMMs are large enough to fill the device.
constexpr std::int64_t kDeviceBlockElements = std::int64_t{1} << 23;
// FP64 tensors of a block's size one evaluator holds at most. A blocked chain keeps every
// tile at once, end to end and stage-local, each with both bounds. Of a block's size: scores
// and p~ (6), the captures widened (4), p's nominal sizes, absolute values and squares and the
// GEMMs' temporaries, with room to spare (20 in all: the 48 counted at D 64 before 2026-11-27,
// less the part below). Of a block's size times D / 64 (a tile row of the accumulator has D
// values against 64 keys of scores): the accumulator before and after each tile's P.V (12) and
// P.V's products by block of keys, their nominal sizes, magnitudes, both bounds' propagation
// and squares (6).
constexpr std::int64_t kTensorsPerBlock = 30, kTensorsPerBlockPerD64 = 18;
// Heads' K and V kept on the device for the blocks and windows that judge them again: all
// eight heads of S 128k at D 128 (268 MB each); heads past it are uploaded for each block.
constexpr std::size_t kDeviceKvBytes = std::size_t{3} << 30;

std::size_t block_bytes(std::int64_t head_dim) {
  const std::int64_t d64 = std::max<std::int64_t>(1, (head_dim + 63) / 64);
  const std::int64_t tensors = kTensorsPerBlock + kTensorsPerBlockPerD64 * d64;
  return static_cast<std::size_t>(kDeviceBlockElements * tensors) * sizeof(double);
}

// kConcurrentHeads, or as many as fit half the device beside the K/V kept (one at least).
int concurrent_blocks(std::int64_t head_dim) {
  std::size_t free = 0, total = 0;
  FC_CUDA(cudaMemGetInfo(&free, &total));
  const std::size_t half = total / 2, for_blocks = half > kDeviceKvBytes ? half - kDeviceKvBytes : 0;
  const std::size_t fit = for_blocks / block_bytes(head_dim);
  return static_cast<int>(std::clamp<std::size_t>(fit, 1, kConcurrentHeads));
}

class GpuEvaluators final : public EvaluatorSource {
 public:
  explicit GpuEvaluators(std::int64_t head_dim) {
    std::string why;
    if (!cuda_device_available(&why)) throw Error("--reference gpu: " + why);
    concurrency_ = concurrent_blocks(head_dim);
  }
  // Each thread's pool keeps what is freed while the evaluators run (blocks allocate the same
  // sizes again and again) and gives it all back here, for the kernels judged next.
  ~GpuEvaluators() override {
    kv_cache_.clear();  // freed on the streams that allocated them, before those go
    contexts_.clear();
  }

  std::unique_ptr<HeadEvaluator> for_head(const HeadInputs& in) const override {
    return std::make_unique<GpuHeadEvaluator>(context(), in);
  }
  const char* device() const override { return "gpu"; }
  int concurrency() const override { return concurrency_; }
  std::int64_t block_elements() const override { return kDeviceBlockElements; }

 private:
  ThreadContext& context() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<ThreadContext>& c = contexts_[std::this_thread::get_id()];
    if (!c) c = std::make_unique<ThreadContext>(kv_cache_);
    c->pool.use();
    return *c;
  }

  int concurrency_ = 1;
  mutable std::mutex mutex_;
  mutable std::map<std::thread::id, std::unique_ptr<ThreadContext>> contexts_;
  mutable gpu::DeviceKvCache kv_cache_{kDeviceKvBytes};
};

}  // namespace

std::unique_ptr<EvaluatorSource> gpu_evaluators(std::int64_t head_dim) {
  return std::make_unique<GpuEvaluators>(head_dim);
}

std::size_t gpu_reference_working_bytes(std::int64_t head_dim) {
  return static_cast<std::size_t>(concurrent_blocks(head_dim)) * block_bytes(head_dim) + kDeviceKvBytes;
}

std::size_t gpu_reference_reserved_bytes() { return gpu::OwnPool::reserved_bytes(); }

}  // namespace fc


#include "reference/gpu/gpu_evaluator.h"

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
  const std::int64_t rows = in.q.rows(), keys = in.k.rows();
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

// Heads (blocks of rows) evaluated at once, each on its own stream and memory pool. More host
// threads contend in the CUDA driver: on the H100 box (2026-11-26) a fused kernel's tile-by-
// tile judgement (wmma-fused 1,4,16384) took 22.7 s with 4, 27.9 s with 8 and 31.8 s with 16,
// while naive 16,16,4096 (large blocks) took 5.6, 5.8 and 5.1 s.
constexpr int kConcurrentHeads = 4;
// Rows x keys of a block: 64 MiB an FP64 tensor, a GiB or so of them a block in flight; four
// times the host's, so that a block's launches and GEMMs are large enough to fill the device.
constexpr std::int64_t kDeviceBlockElements = std::int64_t{1} << 23;
// FP64 tensors of a block's size one evaluator holds at most. A blocked chain keeps every
// tile at once, end to end and stage-local, each with both bounds: scores and p~ (6), the
// accumulator before and after each tile's P.V (12 at D 64 with 64-key tiles, twice that at D
// 128), the captures widened (4), and P.V's GEMM products and temporaries while they are
// formed (about 7).
constexpr std::int64_t kTensorsPerBlock = 48;
// Heads' K and V kept on the device for the blocks and windows that judge them again: all
// eight heads of S 128k at D 128 (268 MB each); heads past it are uploaded for each block.
constexpr std::size_t kDeviceKvBytes = std::size_t{3} << 30;

class GpuEvaluators final : public EvaluatorSource {
 public:
  GpuEvaluators() {
    std::string why;
    if (!cuda_device_available(&why)) throw Error("--reference gpu: " + why);
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
  int concurrency() const override { return kConcurrentHeads; }
  std::int64_t block_elements() const override { return kDeviceBlockElements; }

 private:
  ThreadContext& context() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<ThreadContext>& c = contexts_[std::this_thread::get_id()];
    if (!c) c = std::make_unique<ThreadContext>(kv_cache_);
    c->pool.use();
    return *c;
  }

  mutable std::mutex mutex_;
  mutable std::map<std::thread::id, std::unique_ptr<ThreadContext>> contexts_;
  mutable gpu::DeviceKvCache kv_cache_{kDeviceKvBytes};
};

}  // namespace

std::unique_ptr<EvaluatorSource> gpu_evaluators() { return std::make_unique<GpuEvaluators>(); }

std::size_t gpu_reference_working_bytes() {
  return static_cast<std::size_t>(kConcurrentHeads * kDeviceBlockElements * kTensorsPerBlock) * sizeof(double) +
         kDeviceKvBytes;
}

}  // namespace fc


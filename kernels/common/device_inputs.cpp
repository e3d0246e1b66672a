#include "kernels/common/device_inputs.h"

#include "core/check.h"
#include "core/error.h"

namespace fc {
namespace {
DeviceMemory upload(const void* data, std::size_t bytes, cudaStream_t stream) {
  DeviceMemory m(bytes);
  if (bytes) FC_CUDA(cudaMemcpyAsync(m.get(), data, bytes, cudaMemcpyHostToDevice, stream));
  return m;
}
}  // namespace

DeviceInputs::DeviceInputs(const AttentionInputs& in, cudaStream_t stream) {
  if (in.problem.dtype != DType::f16 && in.problem.dtype != DType::bf16) {
    throw Error(std::string("GPU implementations take fp16 or bf16 inputs, got ") + dtype_name(in.problem.dtype));
  }
  q_ = upload(in.q.data(), in.q.nbytes(), stream);
  k_ = upload(in.k.data(), in.k.nbytes(), stream);
  v_ = upload(in.v.data(), in.v.nbytes(), stream);

  const Shape& s = in.problem.shape;
  const Mask& m = in.problem.mask;
  mask_.causal = m.causal == Causal::top_left ? 1 : m.causal == Causal::bottom_right ? 2 : 0;
  mask_.causal_offset = s.kv_len - s.q_len;
  if (!m.key_lengths.empty()) {
    key_lengths_ = upload(m.key_lengths.data(), m.key_lengths.size() * sizeof(std::int32_t), stream);
    mask_.key_lengths = key_lengths_.as<int>();
  }
  if (m.has_dense()) {
    // Kernels read a boolean mask as bytes and a bias as fp32 (the format the reference
    // sees too: the harness converts float masks to fp32 when it loads a case).
    const HostTensor dense = m.dense_is_bias() ? m.dense.to(DType::f32) : m.dense;
    dense_ = upload(dense.data(), dense.nbytes(), stream);
    mask_.dense = dense_.get();
    mask_.dense_is_bias = m.dense_is_bias() ? 1 : 0;
    const Dims& d = m.dense.dims();
    mask_.dense_row_stride = s.kv_len;
    mask_.dense_head_stride = d[1] == 1 ? 0 : s.q_len * s.kv_len;
    mask_.dense_batch_stride = d[0] == 1 ? 0 : d[1] * s.q_len * s.kv_len;
  }
  FC_CUDA(cudaStreamSynchronize(stream));  // the host tensors may go away after this
}

}  // namespace fc

#include "kernels/common/device_inputs.h"

#include "core/check.h"
#include "core/error.h"
#include "core/packed.h"
#include "kernels/common/host_mask.h"

namespace fc {
namespace {
DeviceMemory upload(const void* data, std::size_t bytes, cudaStream_t stream) {
  DeviceMemory m(bytes);
  if (bytes) FC_CUDA(cudaMemcpyAsync(m.get(), data, bytes, cudaMemcpyHostToDevice, stream));
  return m;
}
template <class T>
DeviceMemory upload(const std::vector<T>& v, cudaStream_t stream) {
  return upload(v.data(), v.size() * sizeof(T), stream);
}
DeviceMemory upload(const HostTensor& t, cudaStream_t stream) { return upload(t.data(), t.nbytes(), stream); }
}  // namespace

DeviceInputs::DeviceInputs(const AttentionInputs& in, cudaStream_t stream) {
  if (in.problem.dtype != DType::f16 && in.problem.dtype != DType::bf16) {
    throw Error(std::string("GPU implementations take fp16 or bf16 inputs, got ") + dtype_name(in.problem.dtype));
  }
  q_ = upload(in.q, stream);
  k_ = upload(in.k, stream);
  v_ = upload(in.v, stream);

  const HostMask host(in.problem);
  mask_ = host.mask();  // host pointers, replaced by device ones below
  auto place = [&](DeviceMemory& memory, DeviceMemory uploaded) {
    memory = std::move(uploaded);
    return memory.get();
  };
  if (mask_.q_lens) {
    mask_.q_lens = static_cast<const int*>(place(q_lens_, upload(host.q_lens, stream)));
    mask_.kv_lens = static_cast<const int*>(place(kv_lens_, upload(host.kv_lens, stream)));
  }
  if (mask_.key_lengths) mask_.key_lengths = static_cast<const int*>(place(key_lengths_, upload(host.key_lengths, stream)));
  if (mask_.alibi_slopes) mask_.alibi_slopes = static_cast<const float*>(place(alibi_, upload(host.alibi_slopes, stream)));
  if (mask_.dense) mask_.dense = place(dense_, upload(host.dense, stream));

  const PackedInputs packed = pack_inputs(in);
  if (in.problem.layout.varlen()) {
    packed_q_ = upload(packed.q, stream);
    packed_k_ = upload(packed.k, stream);
    packed_v_ = upload(packed.v, stream);
    cu_q_ = upload(packed.cu_seqlens_q, stream);
    cu_k_ = upload(packed.cu_seqlens_k, stream);
  }
  if (in.problem.layout.paged()) {
    k_cache_ = upload(packed.k_cache, stream);
    v_cache_ = upload(packed.v_cache, stream);
    block_table_ = upload(in.problem.layout.block_table, stream);
  }
  FC_CUDA(cudaStreamSynchronize(stream));  // the host tensors may go away after this
}

}  // namespace fc

#include "reference/gpu/transfer.h"

#include "core/check.h"

namespace fc::gpu {

DeviceMatrix upload(const MatrixR& m, cudaStream_t stream) {
  DeviceMatrix d(m.rows(), m.cols(), stream);
  if (d.size() > 0) {
    FC_CUDA(cudaMemcpyAsync(d.data(), m.data(), static_cast<std::size_t>(d.size()) * sizeof(double),
                            cudaMemcpyHostToDevice, stream));
  }
  return d;
}

DeviceBounded upload(const Bounded& b, cudaStream_t stream) {
  return {upload(b.value, stream), upload(b.bound, stream), upload(b.tight, stream), b.format};
}

MatrixR download(const DeviceMatrix& m, cudaStream_t stream) {
  MatrixR h(m.rows(), m.cols());
  if (m.size() > 0) {
    FC_CUDA(cudaMemcpyAsync(h.data(), m.data(), static_cast<std::size_t>(m.size()) * sizeof(double),
                            cudaMemcpyDeviceToHost, stream));
  }
  FC_CUDA(cudaStreamSynchronize(stream));
  return h;
}

Bounded download(const DeviceBounded& b, cudaStream_t stream) {
  Bounded h;
  h.value = download(b.value, stream);
  h.bound = download(b.bound, stream);
  h.tight = download(b.tight, stream);
  h.format = b.format;
  return h;
}

}  // namespace fc::gpu

#pragma once
// Device matrices of the GPU reference to and from the host's Eigen matrices and bounded
// tensors (reference/stage_eval.h).
#include "reference/gpu/device_matrix.h"
#include "reference/matrix.h"
#include "reference/stage_eval.h"

namespace fc::gpu {

DeviceMatrix upload(const MatrixR& m, cudaStream_t stream);
DeviceBounded upload(const Bounded& b, cudaStream_t stream);
// Wait for the stream.
MatrixR download(const DeviceMatrix& m, cudaStream_t stream);
Bounded download(const DeviceBounded& b, cudaStream_t stream);

}  // namespace fc::gpu

#pragma once
// One case's inputs on the device, uploaded once and shared by every GPU implementation:
// q [B,H,Sq,D], k and v [B,H,Sk,D] in the input format, and the mask parts.
#include "core/problem.h"
#include "kernels/common/device_mask.h"
#include "stages/device_memory.h"

namespace fc {

class DeviceInputs {
 public:
  DeviceInputs(const AttentionInputs& inputs, cudaStream_t stream);

  const void* q() const { return q_.get(); }
  const void* k() const { return k_.get(); }
  const void* v() const { return v_.get(); }
  const DeviceMask& mask() const { return mask_; }
  bool has_mask() const { return mask_.causal != 0 || mask_.key_lengths || mask_.dense; }

 private:
  DeviceMemory q_, k_, v_, key_lengths_, dense_;
  DeviceMask mask_;
};

}  // namespace fc

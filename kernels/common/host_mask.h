#pragma once
// A problem's mask parts and sequence lengths in the form the implementations read them
// (kernels/common/device_mask.h), in host memory: the CPU implementations pass mask() to
// device_mask_bias, and DeviceInputs uploads the arrays for the GPU ones.
#include <vector>

#include "core/problem.h"
#include "kernels/common/device_mask.h"

namespace fc {

class HostMask {
 public:
  explicit HostMask(const Problem& problem);
  HostMask(const HostMask&) = delete;  // mask() points into this object
  HostMask& operator=(const HostMask&) = delete;

  // Host pointers into the arrays below.
  const DeviceMask& mask() const { return mask_; }

  std::vector<int> q_lens, kv_lens, key_lengths;  // empty where the part is absent
  std::vector<float> alibi_slopes;
  HostTensor dense;  // bool bytes, or the bias in fp32 (the format the reference sees too)

 private:
  DeviceMask mask_;
};

}  // namespace fc

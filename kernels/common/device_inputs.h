#pragma once
// One case's inputs on the device, uploaded once and shared by every GPU implementation:
// q [B,H,Sq,D], k and v [B,Hkv,Sk,D] in the input format (padded past each sequence's
// lengths), the mask parts, and for the kernels that read FlashAttention's layouts the packed
// (varlen) q, k, v with cu_seqlens, and the paged K/V cache with its block table
// (core/packed.h).
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
  bool has_mask() const { return mask_.any(); }

  // Varlen problems: [rows, H, D] and [rows, Hkv, D] packed, cu_seqlens [B + 1].
  const void* packed_q() const { return packed_q_.get(); }
  const void* packed_k() const { return packed_k_.get(); }
  const void* packed_v() const { return packed_v_.get(); }
  std::size_t packed_q_bytes() const { return packed_q_.bytes(); }
  std::size_t packed_k_bytes() const { return packed_k_.bytes(); }
  const int* cu_seqlens_q() const { return cu_q_.as<int>(); }
  const int* cu_seqlens_k() const { return cu_k_.as<int>(); }
  // Paged problems: [num_blocks, block_size, Hkv, D] and the block table [B, max_blocks].
  const void* k_cache() const { return k_cache_.get(); }
  const void* v_cache() const { return v_cache_.get(); }
  const int* block_table() const { return block_table_.as<int>(); }

 private:
  DeviceMemory q_, k_, v_, q_lens_, kv_lens_, key_lengths_, alibi_, dense_;
  DeviceMemory packed_q_, packed_k_, packed_v_, cu_q_, cu_k_, k_cache_, v_cache_, block_table_;
  DeviceMask mask_;
};

}  // namespace fc

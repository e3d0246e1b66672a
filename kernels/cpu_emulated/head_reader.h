#pragma once
// One head's inputs as a CPU implementation reads them, its own way rather than through the
// reference's head_inputs: q, k, v through its own K/V head mapping (GQA), from the padded
// tensors or from FlashAttention's layouts (the packed varlen q, k, v at their cu_seqlens
// offsets, the paged K/V cache through its block table), and the bias of each score from
// the implementations' mask rule (kernels/common/device_mask.h). Faults are planted here,
// beside the reads they break (docs/faults.md).
#include <cstdint>

#include "core/packed.h"
#include "kernels/common/host_mask.h"
#include "reference/stage_eval.h"

namespace fc::emu {

struct ReadFaults {
  bool kv_head_modulo = false;     // gqa-head-mod: K/V head h % Hkv instead of h / group
  bool window_off_by_one = false;  // window-off-by-one: the window's oldest key dropped
  bool q_offsets_from_k = false;   // varlen-cu-seqlens: query rows read at cu_seqlens_k[b]
  bool table_stride = false;       // block-table-stride: block table rows read max_blocks - 1 apart
};

class HeadReader {
 public:
  // layout: read packed q, k, v (varlen problems) and K/V from the paged cache (paged ones);
  // otherwise the padded tensors.
  HeadReader(const AttentionInputs& inputs, bool layout, ReadFaults faults = {});
  // Rows past the sequence's lengths are 0, their scores' bias -inf. Without `bias`, the
  // bias matrix is left empty (a P.V stage needs only v).
  HeadInputs head(std::int64_t b, std::int64_t h, bool bias = true) const;

 private:
  MatrixR rows(const HostTensor& packed, std::int64_t first, std::int64_t count, std::int64_t head,
               std::int64_t total_rows) const;

  const AttentionInputs& in_;
  bool layout_;
  ReadFaults faults_;
  PackedInputs packed_;
  HostMask host_mask_;
  DeviceMask mask_;
};

}  // namespace fc::emu

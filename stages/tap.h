#pragma once
// What an implementation calls after each stage: one capture per declared output, in the
// order of the stage graph. A run without a tap (untraced) skips the calls entirely.
//
// An output may also come in blocks of rows (capture_rows), for implementations that never
// hold a whole stage output at once (a schedule over head groups, a streamed long context):
// the tap assembles them. And an implementation's own kernel may fold a capture's flags in
// as it reads or stores the tensor (fused_flags, stages/flag_accumulator.cuh), sparing the
// tap's separate flag pass over it.
#include <cstddef>
#include <cstdint>

#include "stages/tensor_view.h"

namespace fc {

struct FlagCounts;

// Where a kernel folds in the flags of one capture: each element it visits at
// index_base + its offset in the captured view's storage (the view is dense row-major).
struct FlagSlot {
  FlagCounts* counts = nullptr;  // device memory; null: the tap flags the capture itself
  int own_id = 0;                // the captured buffer's poison id
  unsigned long long index_base = 0;
};

// How the kernel that folds the flags in sees the captured tensor:
//   reads_memory  it loads every element of the view from memory after the stage wrote it and
//                 before anything overwrites it: the same numbers the tap's own pass would read
//   stores        it flags every value it stores into the view as it stores it: an element it
//                 fails to store (a bug) is missed, so a tap that judges (copies) refuses it
enum class FlagAccess { reads_memory, stores };

class Tap {
 public:
  virtual ~Tap() = default;
  virtual void capture(std::size_t stage, std::size_t output, const TensorView& view) = 0;
  // Rows [first_row, first_row + block.dims[0]) of an output of dims [B, H, R(, C)], rows
  // counted over B*H*R; block is dense row-major [rows(, C)]. Every row once, over the run.
  virtual void capture_rows(std::size_t stage, std::size_t output, const TensorView& block, std::int64_t first_row) = 0;
  // A slot for the implementation's kernel, asked before the capture (or block) it stands for
  // is made; first_row as in capture_rows (0 for a whole output). Empty: the tap flags it.
  virtual FlagSlot fused_flags(std::size_t /*stage*/, std::size_t /*output*/, const TensorView& /*view*/,
                               std::int64_t /*first_row*/, FlagAccess /*access*/) {
    return {};
  }
};

}  // namespace fc

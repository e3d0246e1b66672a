#pragma once
// What the single-split flash kernels (wmma-fused, wgmma-fused) share on the host: their
// blocked stage graph with the tile shape kFlashRows x kFlashKeys, their buffers (output, lse
// and the trace build's per-tile buffers), and how FlashParams reads FlashAttention's varlen
// and paged layouts from the device inputs.
#include "kernels/common/fused_trace.h"
#include "kernels/wmma_fused/flash_params.h"

namespace fc {

class DeviceInputs;

struct FlashOutputs {
  Buffer* out = nullptr;
  Buffer* lse = nullptr;
  FusedTraceBuffers trace;
  RowWindow window;  // of the trace build (its output and lse too); every row by default

  static StageGraph stage_graph(const Problem& problem);
  static std::size_t trace_bytes(const Problem& problem);
  void prepare(const Problem& problem, Workspace& workspace, bool traced);
  // Where the kernel writes (output, lse, and in a trace build its tiles) and its one split's
  // tile count.
  void bind(FlashParams& params, const Problem& problem, bool traced) const;
  // The captures of a run: every stage output of a trace build, the results of a production one.
  void capture(Tap& tap, const Problem& problem, bool traced) const;
};

// Varlen: q, k, v packed, q_offsets and cu_seqlens_k set; paged: k and v from the cache
// through the block table (its row stride max_blocks). A planted fault overrides one value.
void read_input_layouts(FlashParams& params, const Problem& problem, const DeviceInputs& inputs);

}  // namespace fc

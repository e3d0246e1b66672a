#pragma once
// What the single-split flash kernels (wmma-fused, wgmma-fused) share on the host: their
// blocked stage graph with tiles of the kernel's rows by its keys, their buffers (output, lse
// and the trace build's per-tile buffers), how FlashParams reads FlashAttention's varlen
// and paged layouts from the device inputs, and the Implementation they both are around that.
#include "kernels/common/fused_trace.h"
#include "kernels/wmma_fused/flash_params.h"

namespace fc {

class DeviceInputs;

struct FlashOutputs {
  Buffer* out = nullptr;
  Buffer* lse = nullptr;
  FusedTraceBuffers trace;
  RowWindow window;  // asked for the trace build (its output and lse too); every row by default
  RowWindow held;    // the rows the buffers prepare() made hold: `window` in a trace build, else all
  int keys = kFlashKeys;  // a tile's, as prepare() was told
  int rows = kFlashRows;  // a block's, as prepare() was told

  static StageGraph stage_graph(const Problem& problem, int keys, int rows);
  static std::size_t trace_bytes(const Problem& problem, int keys);
  void prepare(const Problem& problem, Workspace& workspace, bool traced, int keys, int rows);
  // Where the kernel writes (output, lse, and in a trace build its tiles) and its one split's
  // tile count.
  void bind(FlashParams& params, const Problem& problem, bool traced) const;
  // The captures of a run: every stage output of a trace build, the results of a production one.
  void capture(Tap& tap, const Problem& problem) const;
};

// Varlen: q, k, v packed, q_offsets and cu_seqlens_k set; paged: k and v from the cache
// through the block table (its row stride max_blocks). A planted fault overrides one value.
void read_input_layouts(FlashParams& params, const Problem& problem, const DeviceInputs& inputs);
// Why a paged cache's blocks cannot be read so (read_input_layouts keeps the block size as its
// log2): a size that is not a power of two, or under `min_keys` (`why_min` says why the kernel
// needs them).
std::optional<std::string> paged_blocks_unsupported(const Problem& problem, std::int64_t min_keys = 1,
                                                    const std::string& why_min = "");

// What both single-split flash implementations are beside their kernels: the stage graph, the
// buffers and their windows, the parameters of a launch and its captures.
class FlashImplementation : public Implementation {
 public:
  bool on_gpu() const override { return true; }
  StageGraph stage_graph(const Problem& p) const override {
    return FlashOutputs::stage_graph(p, key_tile(p), query_tile(p));
  }
  std::size_t trace_bytes(const Problem& p) const override { return FlashOutputs::trace_bytes(p, key_tile(p)); }
  bool traces_in_windows() const override { return true; }
  // Each tile's stage outputs have their own slot of the trace buffers.
  bool captures_stay_in_buffers() const override { return true; }
  void set_trace_window(const RowWindow& window) override { outputs_.window = window; }
  void prepare(const Problem& p, Workspace& ws, bool traced) override {
    outputs_.prepare(p, ws, traced, key_tile(p), query_tile(p));
  }

 protected:
  // The keys of one tile of the kernel that runs `p`: the stage graph's tile width.
  virtual int key_tile(const Problem&) const { return kFlashKeys; }
  // The query rows of one of its blocks: the stage graph's query tile.
  virtual int query_tile(const Problem&) const { return kFlashRows; }
  // A launch's parameters: the inputs in their layouts, the buffers bound, and the planted
  // production-epilogue-scale.
  FlashParams launch_params(const RunContext& ctx) const;
  // The run's captures, once its kernel is launched.
  void capture(const RunContext& ctx) const;

 private:
  FlashOutputs outputs_;
};

}  // namespace fc

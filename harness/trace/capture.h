#pragma once
// The tap the harness hands an implementation: for every captured stage output it runs the
// flag pass where the tensor lives (device kernel or host loop) and, when comparing, copies
// the tensor to the host in logical [B,H,R(,C)] order. Device flag results stay on the
// device until finish(): one read-back per case.
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "stages/device_memory.h"
#include "stages/flags.h"
#include "stages/stage.h"
#include "stages/tap.h"
#include "reference/matrix.h"

namespace fc {

struct Captured {
  std::size_t stage = 0, output = 0;
  bool present = false;   // the implementation captured it
  TensorView view;        // as captured (its data stale after the run unless resident keeps it; null in blocks)
  FlagCounts flags;       // first indices are logical row-major indices after finish()
  bool flags_of_extent = false;  // flagged on the host copy, over the elements that exist (varlen)
  HostTensor tensor;      // a copy, when comparing on the host (or brought back: bring_to_host)
  // Its elements on the device in logical row-major order, when comparing on a GPU: a copy
  // where the device has room, or the captured region itself, its buffers kept alive by this
  // pointer (CaptureTap::keep_on_device). Nothing crosses to the host unless asked for.
  std::shared_ptr<const void> resident;
  std::string problem;    // why the capture could not be used (dims or dtype not as declared)
  // The query rows it holds (a trace run in a window): its R is the window's rows, and its
  // flags' first indices are already those of the whole [B,H,Sq(,C)].
  RowWindow window;

  bool copied() const { return !tensor.empty() || resident; }
};

// Host copies of the captures kept on the device (what attribution, hypotheses, snapshots and
// reports read); their device copies are released.
void bring_to_host(std::vector<Captured>& captured);

// For a varlen problem that copies to the host, the flags are taken on the host copy over
// the elements that exist (stages/stage.h, existing_extent): a row past a sequence's length
// is never written, and is no unwritten output.
//
// Fused flags (stages/tap.h): a tap that copies (judges) hands out slots only to kernels that
// read the captured memory, which see what its own pass would; one that only flags (bench's
// traced run) also to kernels that flag what they store.
class CaptureTap final : public Tap {
 public:
  // results_only: a production run's tap; it keeps the outputs stages/stage.h calls results
  // and ignores every other capture (no flag pass, no copy). fuse_flags false: every capture
  // gets the tap's own flag pass (the GPU tests compare the two).
  CaptureTap(const StageGraph& graph, const Problem& problem, bool copy_to_host, cudaStream_t stream,
             bool results_only = false, bool fuse_flags = true);
  void capture(std::size_t stage, std::size_t output, const TensorView& view) override;
  void capture_rows(std::size_t stage, std::size_t output, const TensorView& block, std::int64_t first_row) override;
  FlagSlot fused_flags(std::size_t stage, std::size_t output, const TensorView& view, std::int64_t first_row,
                       FlagAccess access) override;
  // Copies of device tensors stay on the device (Captured::resident) while it keeps
  // `headroom` bytes free beside them; the rest (host tensors, row blocks, varlen) go to the host.
  // With `buffers` (what owns the run's buffers, when nothing writes a capture after it is
  // captured: Implementation::captures_stay_in_buffers), a tensor in one of them is not copied
  // at all: its capture points into the buffers and keeps them.
  void keep_on_device(std::size_t headroom, std::shared_ptr<const void> buffers = nullptr) {
    device_headroom_ = headroom;
    buffers_ = std::move(buffers);
  }
  // The run captures `window`'s rows of every output (stages/stage.h, RowWindow).
  void set_window(const RowWindow& window) { window_ = window; }
  void finish();
  // Ready for another run of the same graph (benchmarks reuse one tap).
  void reset();
  std::vector<Captured>& results() { return captured_; }
  // Captures whose flags a kernel of the implementation folded in (this run).
  std::size_t fused_slots() const;

 private:
  std::size_t slot(std::size_t stage, std::size_t output) const;
  Dims declared_dims(std::size_t stage, std::size_t output) const;
  FlagCounts* device_slot(std::size_t index);
  FlagCounts flags_of_extent(const HostTensor& logical, int buffer_id, const Stage& stage,
                             const StageOutput& output) const;

  const StageGraph& graph_;
  const Problem& problem_;
  bool copy_;
  cudaStream_t stream_;
  bool results_only_;
  bool fuse_flags_;
  std::optional<std::size_t> device_headroom_;
  std::shared_ptr<const void> buffers_;
  RowWindow window_;
  std::vector<std::size_t> first_slot_;  // per stage
  std::vector<Captured> captured_;
  struct RowBlock {
    std::int64_t first = 0, rows = 0;
  };
  std::vector<std::set<std::int64_t>> fused_rows_;  // per slot: first rows of the blocks a kernel flags
  std::vector<std::vector<RowBlock>> blocks_;       // per slot: the blocks captured so far
  std::vector<char> in_blocks_;                     // per slot: captured in blocks (capture_rows)
  DeviceMemory device_flags_;            // FlagCounts per slot, allocated on first device capture
};

// A logical index into a windowed capture's [B,H,R(,C)] as the index of the same element in
// the whole [B,H,q_len(,C)].
unsigned long long unwindowed_index(unsigned long long index, const Dims& held, std::int64_t q_len,
                                    const RowWindow& window);
// Head (b, h) of a capture as a [q_len, C] matrix (as stored, without the stage's value
// scale): a windowed one's rows in their place, NaN elsewhere.
MatrixR captured_head(const Captured& c, std::int64_t b, std::int64_t h, std::int64_t q_len);
// The row of head (b, h)'s `row` in the capture's storage of [B,H,R(,C)] (-1: not held).
std::int64_t held_row(const Captured& c, std::int64_t row);

// Host copy of a view in logical row-major order (from host or device memory).
HostTensor copy_to_host(const TensorView& view, cudaStream_t stream);

}  // namespace fc

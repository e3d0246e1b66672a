#pragma once
// One traced run of one implementation on one case: prepare its buffers, poison them, run
// it with the capturing tap, read the flags back.
#include <optional>
#include <string>
#include <vector>

#include "harness/trace/capture.h"
#include "kernels/implementation.h"

namespace fc {

// The production build's run of the same inputs, in buffers of its own, poisoned afresh: its
// results (stages/stage.h, is_result) in graph order, and what its buffers are called.
struct ProductionRun {
  std::vector<Captured> results;
  std::vector<std::string> buffer_names;  // index: poison id
  std::string error;                      // non-empty when the run failed
  bool ran() const { return !results.empty() || !error.empty(); }
};

struct TraceRun {
  StageGraph graph;
  std::vector<Captured> captured;
  std::vector<std::string> buffer_names;  // index: poison id
  std::vector<DescriptorReport> descriptors;  // cuBLASLt calls, read back and linted
  std::string error;                      // non-empty when the run itself failed
  ProductionRun production;               // empty when not run
  RowWindow window;                       // the query rows the trace build captured
};

// What the GPU reference's working set for `problem` needs on the device beyond what its pools
// hold already (an earlier window's evaluators keep theirs for the next).
std::size_t reference_room(const Problem& problem);
// What an implementation may allocate while it runs, beyond its prepared buffers: an eighth of
// the device.
std::size_t run_allowance();

// Why the implementation's trace build cannot run here: a GPU implementation's buffers need more
// memory than the device has free, or a CPU implementation's captures more than the host holds
// (nullopt when they fit).
std::optional<std::string> trace_does_not_fit(const Implementation& impl, const Problem& problem,
                                              const RowWindow& window = {});
// Bytes its trace build's buffers need in `window`.
std::size_t trace_bytes_in(const Implementation& impl, const Problem& problem, const RowWindow& window);

// keep_on_device: device tensors stay on the device, for a reference on the GPU
// (Captured::resident): copies where it has room, or, when nothing writes a capture after it
// is captured (Implementation::captures_stay_in_buffers), the captured regions themselves, the
// run's buffers kept for as long as a capture is.
// window: only those query rows traced (Implementation::traces_in_windows).
TraceRun run_traced(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                    bool copy_to_host, bool keep_on_device = false, const RowWindow& window = {});

// Runs the production build (RunContext::trace_build false) and keeps its results.
ProductionRun run_production(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                             const StageGraph& graph);

}  // namespace fc

#include "harness/trace/session.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/check.h"
#include "core/error.h"
#include "core/resource_usage.h"
#include "core/watchdog.h"
#include "reference/gpu/gpu_evaluator.h"
#include "stages/device_kernels.h"

namespace fc {

std::size_t reference_room(const Problem& problem) {
  const std::size_t working = gpu_reference_working_bytes(problem.shape.head_dim), held = gpu_reference_reserved_bytes();
  return working > held ? working - held : 0;
}

std::size_t run_allowance() {
  std::size_t free = 0, total = 0;
  FC_CUDA(cudaMemGetInfo(&free, &total));
  return total / 8;
}

namespace {

// What device copies of captures leave free: the reference's room less `returned_bytes` (the
// implementation's buffers, when they are given back before it runs), and at least room for
// what the implementation allocates while it runs.
std::size_t device_headroom(const Problem& problem, std::size_t returned_bytes) {
  const std::size_t reference = reference_room(problem);
  return std::max(reference > returned_bytes ? reference - returned_bytes : 0, run_allowance());
}

std::vector<std::string> names_of(const Workspace& workspace) {
  std::vector<std::string> names{""};
  for (int id = 1; id <= workspace.buffer_count(); ++id) names.push_back(workspace.buffer_name(id));
  return names;
}

// What a poison pattern among a run's captures means: nothing where the implementation's
// values never were in its poisoned buffers (their buffer then unknown, id 0); a kernel's own
// NaN where it names no buffer of the run.
void read_poison_as(const Implementation& impl, std::vector<Captured>& captured, std::size_t buffers) {
  for (Captured& c : captured) {
    if (impl.poisons_its_buffers()) {
      forget_unknown_poison(c.flags, buffers);
    } else {
      forget_poison(c.flags);
      c.view.buffer_id = 0;
    }
  }
}

// One run: prepare the implementation's buffers, tune, poison, run with the tap, read the
// flags back. Returns the run's error, empty when it ran.
std::string run_once(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                     Workspace& workspace, CaptureTap& tap, bool trace_build, std::vector<DescriptorReport>* descriptors,
                     cudaStream_t stream, bool gpu, bool keep_on_device = false, const RowWindow& window = {},
                     std::shared_ptr<const void> buffers = nullptr) {
  if (gpu && trace_build) {
    if (std::optional<std::string> why = trace_does_not_fit(impl, inputs.problem, window)) return *why;
  }
  try {
    impl.prepare(inputs.problem, workspace, trace_build);
  } catch (const Error& e) {
    return std::string("preparing its buffers: ") + e.what();
  }
  if (keep_on_device && gpu) {  // a CPU implementation's captures are on the host
    // Captures keep the buffers only where the reference's room stays free beside them. The
    // run's own allocations are not counted: the buffers exist while it runs either way, and
    // keeping them only makes them outlive it. (Counting them failed on the H100 box, 2026-11-27:
    // a window sized to leave exactly that much free has a little less after prepare, and every
    // capture of wmma-fused 1,4,65536 was copied to the host: 129 s, 36 GB, against 21 s.)
    if (buffers) {
      std::size_t free = 0, total = 0;
      FC_CUDA(cudaMemGetInfo(&free, &total));
      if (free < reference_room(inputs.problem)) buffers.reset();
    }
    // Copies leave the reference its room; the buffers count toward it only when they are given
    // back before it runs (not when captures keep them).
    const std::size_t returned = buffers ? 0 : workspace.bytes();
    tap.keep_on_device(device_headroom(inputs.problem, returned), std::move(buffers));
  }
  // A kernel that never finishes ends the process with one line (core/watchdog.h).
  const Watchdog watchdog(impl.name() + (trace_build ? ": the trace build's run" : ": the production build's run"));
  if (gpu) {
    RunContext tuning{inputs, device, nullptr, stream};
    impl.tune(tuning);
  }
  workspace.poison(stream);
  if (gpu) launch_poison_shared_memory(stream);
  RunContext context{inputs, device, &tap, stream, descriptors};
  context.trace_build = trace_build;
  try {
    impl.run(context);
    if (gpu) FC_CUDA(cudaStreamSynchronize(stream));
  } catch (const Error& e) {
    return e.what();
  }
  tap.finish();
  return "";
}

}  // namespace

std::size_t trace_bytes_in(const Implementation& impl, const Problem& problem, const RowWindow& window) {
  const std::size_t whole = impl.trace_bytes(problem);
  if (problem.shape.q_len == 0) return whole;
  // The buffers hold every row alike.
  return static_cast<std::size_t>(static_cast<double>(whole) * static_cast<double>(window.held(problem.shape.q_len)) /
                                  static_cast<double>(problem.shape.q_len));
}

std::optional<std::string> trace_does_not_fit(const Implementation& impl, const Problem& problem,
                                              const RowWindow& window) {
  if (!impl.on_gpu()) {
    // A CPU implementation's captures all live in host memory at once: a case whose captures
    // the machine cannot hold is declined before it runs, not ended by a failed allocation.
    return host_memory_shortfall(static_cast<double>(trace_bytes_in(impl, problem, window)) +
                                     graph_output_bytes(problem.shape, impl.stage_graph(problem)),
                                 "its trace's captures");
  }
  const std::size_t needed = trace_bytes_in(impl, problem, window);
  if (needed == 0) return std::nullopt;
  std::size_t free = 0, total = 0;
  FC_CUDA(cudaMemGetInfo(&free, &total));
  if (needed <= free) return std::nullopt;
  const auto gib = [](std::size_t bytes) { return static_cast<double>(bytes) / (1ull << 30); };
  char text[384];
  const std::string rows =
      window.whole() ? std::string("every query row") : "a window of " + std::to_string(window.rows) + " query rows";
  std::snprintf(text, sizeof text,
                "its trace build's buffers need %.1f GiB at %s (every tile of %s, whatever --rows judges); the "
                "device has %.1f GiB free",
                gib(needed), problem.shape.to_string().c_str(), rows.c_str(), gib(free));
  return std::string(text);
}

TraceRun run_traced(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                    bool copy_to_host, bool keep_on_device, const RowWindow& window) {
  TraceRun run;
  run.graph = impl.stage_graph(inputs.problem);
  run.window = window;
  if (!window.whole() && !impl.traces_in_windows()) {
    run.error = "its trace build cannot run in a window of query rows";
    return run;
  }
  impl.set_trace_window(window);
  const bool gpu = impl.on_gpu();
  std::optional<CudaStream> stream;
  if (gpu) stream.emplace();
  const cudaStream_t s = gpu ? stream->get() : nullptr;

  // Shared with the captures that point into it (Implementation::captures_stay_in_buffers).
  const auto workspace = std::make_shared<Workspace>(gpu);
  CaptureTap tap(run.graph, inputs.problem, copy_to_host, s);
  tap.set_window(window);
  run.error = run_once(impl, inputs, device, *workspace, tap, true, &run.descriptors, s, gpu, keep_on_device, window,
                       impl.captures_stay_in_buffers() ? workspace : nullptr);
  run.captured = std::move(tap.results());
  run.buffer_names = names_of(*workspace);
  read_poison_as(impl, run.captured, run.buffer_names.size());
  return run;
}

ProductionRun run_production(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                             const StageGraph& graph) {
  ProductionRun run;
  const bool gpu = impl.on_gpu();
  std::optional<CudaStream> stream;
  if (gpu) stream.emplace();
  const cudaStream_t s = gpu ? stream->get() : nullptr;

  Workspace workspace(gpu);
  CaptureTap tap(graph, inputs.problem, true, s, true);
  run.error = run_once(impl, inputs, device, workspace, tap, false, nullptr, s, gpu);
  for (Captured& c : tap.results()) {
    if (is_result(graph.stages[c.stage].outputs[c.output].quantity)) run.results.push_back(std::move(c));
  }
  run.buffer_names = names_of(workspace);
  read_poison_as(impl, run.results, run.buffer_names.size());
  return run;
}

}  // namespace fc

#include "harness/trace/session.h"

#include <optional>

#include "core/error.h"

namespace fc {

TraceRun run_traced(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                    bool copy_to_host) {
  TraceRun run;
  run.graph = impl.stage_graph(inputs.problem);
  const bool gpu = impl.on_gpu();
  std::optional<CudaStream> stream;
  if (gpu) stream.emplace();
  const cudaStream_t s = gpu ? stream->get() : nullptr;

  Workspace workspace(gpu);
  impl.prepare(inputs.problem, workspace, true);
  if (gpu) {
    RunContext tuning{inputs, device, nullptr, s};
    impl.tune(tuning);
  }
  workspace.poison(s);
  CaptureTap tap(run.graph, inputs.problem, copy_to_host, s);
  RunContext context{inputs, device, &tap, s, &run.descriptors};
  try {
    impl.run(context);
    if (gpu) stream->synchronize();
  } catch (const Error& e) {
    run.error = e.what();
  }
  if (run.error.empty()) tap.finish();
  run.captured = std::move(tap.results());
  run.buffer_names.push_back("");
  for (int id = 1; id <= workspace.buffer_count(); ++id) run.buffer_names.push_back(workspace.buffer_name(id));
  return run;
}

}  // namespace fc

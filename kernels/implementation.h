#pragma once
// The one interface every attention implementation under test follows, fused or not, GPU
// or CPU: it declares its stage graph, allocates its buffers in the workspace the harness
// poisons, and runs, calling the tap after each stage when one is given.
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "stages/descriptor_report.h"
#include "stages/stage.h"
#include "stages/tap.h"
#include "stages/workspace.h"

namespace fc {

class DeviceInputs;

struct RunContext {
  const AttentionInputs& inputs;
  const DeviceInputs* device = nullptr;  // set for GPU implementations
  Tap* tap = nullptr;                    // null: untraced
  cudaStream_t stream = nullptr;
  std::vector<DescriptorReport>* descriptors = nullptr;  // cuBLASLt calls, when recorded
  // false: the production build runs, and the tap wants its results only (stages/stage.h,
  // is_result); a fused kernel then launches its production instantiation and captures its
  // output buffers. The tap ignores every other capture.
  bool trace_build = true;

  bool traced() const { return tap != nullptr && trace_build; }
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  virtual bool on_gpu() const = 0;
  // Whether an untraced run is a build of its own to judge beside the traced one (a captured
  // output, `check`, has only what it captured).
  virtual bool has_production_build() const { return true; }
  // Whether its outputs are computed into the run's poisoned buffers, so that a poison pattern
  // there means memory nobody wrote. False for outputs copied in from a file (`check`): a
  // NaN there may carry any payload, a poison pattern's among them, and is a NaN.
  virtual bool poisons_its_buffers() const { return true; }
  // Why this implementation cannot run the problem, if it cannot.
  virtual std::optional<std::string> unsupported(const Problem&) const { return std::nullopt; }
  virtual StageGraph stage_graph(const Problem& problem) const = 0;
  // Allocates what run() writes; called once per case, before the harness poisons. `traced`:
  // the runs will be given a tap that wants every stage (fused kernels then also allocate
  // their trace buffers); false for untraced and production runs.
  virtual void prepare(const Problem& problem, Workspace& workspace, bool traced) = 0;
  // Chooses algorithms by timing them on the case's buffers (cuBLASLt split-K); called after
  // prepare and before the harness poisons, so what tuning writes is poisoned again.
  virtual void tune(RunContext&) {}
  virtual void run(RunContext& context) = 0;
  // The cuBLASLt calls the implementation would make, built and read back without running
  // anything (no GPU needed): `flashcore-check describe`.
  virtual std::vector<DescriptorReport> describe(const Problem&) const { return {}; }
  // Fault injection (docs/faults.md): the faults this implementation can plant, and the
  // switch. The clean path is the default; inject("") restores it. An unsupported fault is
  // an fc::Error.
  virtual std::vector<std::string> faults() const { return {}; }
  void inject(const std::string& fault);
  const std::string& injected() const { return fault_; }
  // Bytes of the extra buffers a traced run allocates (the trace build of a fused kernel).
  virtual std::size_t trace_bytes(const Problem&) const { return 0; }
  // Whether its trace build can run in a window of query rows (stages/stage.h, RowWindow):
  // set_trace_window then applies to the next prepare and runs of the trace build, whose
  // captures hold the window's rows alone; a production build is never windowed.
  virtual bool traces_in_windows() const { return false; }
  virtual void set_trace_window(const RowWindow&) {}
  // Whether every capture of its trace build is a region of its buffers that nothing in the
  // run writes after it is captured: the buffers are then kept for as long as a capture is
  // read, instead of copied when captured.
  virtual bool captures_stay_in_buffers() const { return false; }

 protected:
  bool faulty(const char* fault) const { return fault_ == fault; }

 private:
  std::string fault_;
};

// Every implementation built into this binary, in a stable order, then those of the sources
// added below.
std::vector<std::unique_ptr<Implementation>> make_implementations();
// Implementations from outside this binary (plugins: harness/plugin/): the registry asks each
// source for its implementations whenever it lists them, after the built-in ones.
using ImplementationSource = std::function<std::vector<std::unique_ptr<Implementation>>()>;
void add_implementation_source(ImplementationSource source);
std::unique_ptr<Implementation> make_implementation(const std::string& name);  // null if unknown
// The implementations named, in the order given (all, when `names` is empty); an unknown name
// is an Error "--impl 'NAME': unknown implementation (built: ...)".
std::vector<std::unique_ptr<Implementation>> select_implementations(const std::vector<std::string>& names);
// Those of `impls` that have `fault`, with it planted. An Error if none has it, saying whether
// the fault is unknown or planted only in implementations not selected.
std::vector<std::unique_ptr<Implementation>> with_fault(std::vector<std::unique_ptr<Implementation>> impls,
                                                        const std::string& fault);

}  // namespace fc

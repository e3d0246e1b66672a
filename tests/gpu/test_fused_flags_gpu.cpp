// Flags folded into an implementation's own kernels (stages/tap.h, fused_flags) against the
// tap's standalone flag pass over the same run: equal, field by field and first index by
// first index, for every capture, on the clean path and under every seeded fault, for a tap
// that only flags (every fused slot) and for one that judges (slots for kernels that read
// the memory only).
#include <string>
#include <vector>

#include "catch.h"
#include "support/flag_checks.h"
#include "core/check.h"
#include "core/error.h"
#include "harness/inputs.h"
#include "harness/trace/capture.h"
#include "kernels/common/device_inputs.h"
#include "kernels/cublaslt_paged/cublaslt_paged.h"
#include "stages/device_memory.h"
#include "stages/workspace.h"

namespace fc {
namespace {

struct FlagRun {
  std::vector<Captured> captured;
  std::string error;
  std::size_t fused_slots = 0;
};

FlagRun run_with(Implementation& impl, const AttentionInputs& in, const DeviceInputs& device, bool copy, bool fuse) {
  const StageGraph graph = impl.stage_graph(in.problem);
  CudaStream stream;
  Workspace workspace(true);
  impl.prepare(in.problem, workspace, true);
  CaptureTap tap(graph, in.problem, copy, stream.get(), false, fuse);
  FlagRun run;
  try {
    RunContext tuning{in, &device, nullptr, stream.get()};
    impl.tune(tuning);
    workspace.poison(stream.get());
    RunContext context{in, &device, &tap, stream.get()};
    impl.run(context);
    FC_CUDA(cudaStreamSynchronize(stream.get()));
  } catch (const Error& e) {
    run.error = e.what();
  }
  tap.finish();
  run.fused_slots = tap.fused_slots();
  run.captured = std::move(tap.results());
  return run;
}

// The implementations with fused flags, with the shapes that reach each of their paths:
// cublaslt-paged whole, in groups of three K/V heads (of eight: 3, 3, 2, the last its own
// matmul; GQA: one K/V head of three query heads a group) and with pages of 256 keys (the
// eight-per-lane softmax); bf16 once; cublaslt-splitk with rows a whole number of 16-byte
// vectors (300 keys: 16-byte packs) and not (301: one element at a time).
struct Config {
  std::string impl;
  Shape shape;
  DType dtype = DType::f16;
};

std::unique_ptr<Implementation> make(const std::string& name) {
  if (name == "cublaslt-paged/groups") return make_cublaslt_paged({128, 3 * 130});
  if (name == "cublaslt-paged/page256") return make_cublaslt_paged({256, 0});
  return make_implementation(name);
}

}  // namespace

TEST_CASE("flags folded into the softmax and normalize kernels equal the standalone flag pass", "[gpu][flags]") {
  const Config configs[] = {
      {"cublaslt-paged", {2, 4, 130, 300, 64}},
      {"cublaslt-paged/groups", {2, 4, 130, 300, 64}},
      {"cublaslt-paged/groups", {2, 6, 130, 300, 64, 2}},
      {"cublaslt-paged/page256", {1, 3, 70, 600, 64}},
      {"cublaslt-paged", {1, 2, 90, 200, 128}, DType::bf16},
      {"cublaslt-splitk", {2, 4, 130, 300, 64}},
      {"cublaslt-splitk", {1, 3, 70, 301, 64}, DType::bf16},
  };
  for (const Config& config : configs) {
    std::vector<std::string> faults{""};
    for (const std::string& f : make(config.impl)->faults()) faults.push_back(f);
    // padding=300,40: the first -inf only in the second batch, a later group of K/V heads than
    // the first, so that a slot's first index needs the group's base row.
    for (const std::string mask : {"none", "padding=40,300", "padding=300,40", "causal-br"}) {
      const bool two_batches = config.shape.batch == 2;
      if (!two_batches && mask == "padding=300,40") continue;
      CaseSpec spec;
      spec.shape = config.shape;
      spec.dtype = config.dtype;
      spec.mask = two_batches || mask != "padding=40,300" ? mask : "padding=40";
      spec.seed = 5;
      const AttentionInputs in = generate_inputs(spec);
      const DeviceInputs device(in, nullptr);
      for (const std::string& fault : faults) {
        std::unique_ptr<Implementation> impl = make(config.impl);
        impl->inject(fault);
        for (bool copy : {false, true}) {
          INFO(config.impl << " " << spec.label() << " fault '" << fault << "' copy " << copy);
          const FlagRun standalone = run_with(*impl, in, device, copy, false);
          const FlagRun fused = run_with(*impl, in, device, copy, true);
          INFO("error: " << standalone.error);
          CHECK(standalone.error == fused.error);
          REQUIRE(standalone.captured.size() == fused.captured.size());
          int compared = 0;
          for (std::size_t i = 0; i < fused.captured.size(); ++i) {
            const Captured &a = standalone.captured[i], &b = fused.captured[i];
            INFO("stage " << a.stage << " output " << a.output);
            CHECK(a.present == b.present);
            CHECK(a.problem == b.problem);
            if (!a.present || !a.problem.empty()) continue;
            test::require_same_flags(a.flags, b.flags);
            ++compared;
          }
          // A fault cuBLASLt cannot run at all (fp16 scores from bf16 inputs) fails both alike;
          // nothing else may fail.
          const bool unrunnable = fault == "fp16-scores" && config.dtype == DType::bf16;
          if (!unrunnable) CHECK(standalone.error.empty());
          if (unrunnable && !standalone.error.empty() && compared == 0) continue;
          CHECK(compared > 0);
          // Every run fuses the scores a softmax reads; one that only flags also what it stores.
          CHECK(fused.fused_slots > 0);
          if (!copy) CHECK(fused.fused_slots > run_with(*impl, in, device, true, true).fused_slots);
        }
      }
    }
  }
}

}  // namespace fc

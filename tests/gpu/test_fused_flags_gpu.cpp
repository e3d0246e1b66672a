// Flags folded into an implementation's own kernels (stages/tap.h, fused_flags) against the
// tap's standalone flag pass over the same run: equal, field by field and first index by
// first index, for every capture, on the clean path and under every seeded fault, for a tap
// that only flags (every fused slot) and for one that judges (slots for kernels that read
// the memory only).
#include <string>
#include <vector>

#include "catch.h"
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
  RunContext tuning{in, &device, nullptr, stream.get()};
  impl.tune(tuning);
  workspace.poison(stream.get());
  CaptureTap tap(graph, in.problem, copy, stream.get(), false, fuse);
  RunContext context{in, &device, &tap, stream.get()};
  FlagRun run;
  try {
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

void require_same(const FlagCounts& a, const FlagCounts& b) {
  CHECK(a.nan == b.nan);
  CHECK(a.pos_inf == b.pos_inf);
  CHECK(a.neg_inf == b.neg_inf);
  CHECK(a.subnormal == b.subnormal);
  CHECK(a.unwritten == b.unwritten);
  CHECK(a.foreign_poison == b.foreign_poison);
  CHECK(a.first_nan == b.first_nan);
  CHECK(a.first_inf == b.first_inf);
  CHECK(a.first_unwritten == b.first_unwritten);
  CHECK(a.first_foreign == b.first_foreign);
  CHECK(a.max_abs_bits == b.max_abs_bits);
}

}  // namespace

// The implementations with fused flags; cublaslt-paged also in groups of three K/V heads (of
// eight: groups 3, 3, 2), so that every stage output comes in blocks of rows.
std::unique_ptr<Implementation> make(const std::string& name) {
  if (name == "cublaslt-paged/groups") return make_cublaslt_paged({128, 3 * 130});
  return make_implementation(name);
}

TEST_CASE("flags folded into the softmax and normalize kernels equal the standalone flag pass", "[gpu][flags]") {
  for (const char* name : {"cublaslt-paged", "cublaslt-paged/groups", "cublaslt-splitk"}) {
    std::vector<std::string> faults{""};
    for (const std::string& f : make(name)->faults()) faults.push_back(f);
    for (const char* mask : {"none", "padding=40,300", "causal-br"}) {
      CaseSpec spec;
      spec.shape = {2, 3, 130, 300, 64};
      spec.mask = mask;
      spec.seed = 5;
      const AttentionInputs in = generate_inputs(spec);
      const DeviceInputs device(in, nullptr);
      for (const std::string& fault : faults) {
        std::unique_ptr<Implementation> impl = make(name);
        impl->inject(fault);
        for (bool copy : {false, true}) {
          INFO(name << " " << mask << " fault '" << fault << "' copy " << copy);
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
            require_same(a.flags, b.flags);
            ++compared;
          }
          CHECK(compared > 0);
          if (!copy) CHECK(fused.fused_slots > 0);
        }
      }
    }
  }
}

}  // namespace fc

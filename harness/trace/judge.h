#pragma once
// Judging one implementation on one case: traced run, comparison, attribution, verdict. A
// replay judges a run read back from a snapshot the same way, with no GPU.
#include "harness/trace/evaluate.h"
#include "harness/trace/session.h"
#include "reports/case_result.h"

namespace fc {

CaseDescription describe_case(const AttentionInputs& inputs, const std::string& label, const std::string& mask,
                              const std::string& dist, std::optional<std::uint64_t> seed);

// Where the FP64 reference is computed (--reference): on the host (Eigen), on the GPU, or
// automatically on the GPU when the implementation runs on one.
enum class ReferenceDevice : std::uint8_t { cpu, gpu, automatic };
ReferenceDevice parse_reference_device(const std::string& text);

// How a case is judged: which bound decides (the tight one by default), and whether the
// production build runs too (after the trace build, on the same inputs, in fresh buffers).
struct JudgeOptions {
  BoundChoice judged_by = BoundChoice::tight;
  bool production = true;
  RowSpec rows;  // which query rows are compared (--rows); every row by default
  ReferenceDevice reference = ReferenceDevice::automatic;
  // > 0: an implementation that can (Implementation::traces_in_windows) runs its trace build
  // in windows of this many query rows, each judged and dropped before the next; 0: in windows
  // sized to the device when the whole trace and its captures do not fit it (--window-rows).
  std::int64_t window_rows = 0;
  // The caller reads the run's captures afterwards (sensitivity perturbs them): never in
  // windows, whose run keeps no captures but an attributed window's.
  bool whole_trace = false;
  // Time each step of the evaluation (CaseResult::evaluation_steps; --profile-evaluation).
  bool profile_evaluation = false;
};

// Comparison and attribution of a finished run (live, or read from a snapshot). `automatic`
// means the host here: a run read back is judged where it is replayed. Captures kept on the
// device come to the host (bring_to_host) when attribution or the references need them.
// `rows`, when given: the rows judged, instead of options.rows' sample.
CaseResult judge_run(const std::string& impl, const AttentionInputs& inputs, const CaseDescription& description,
                     TraceRun& run, std::vector<OutputReferences>* references = nullptr,
                     const JudgeOptions& options = {}, const RowSample* rows = nullptr);

struct Judged {
  CaseResult result;
  TraceRun run;
  std::vector<OutputReferences> references;  // when asked for (snapshots)
};

Judged judge_case_keeping(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                          const DeviceInputs* device, bool keep_references, const JudgeOptions& options = {});

CaseResult judge_case(Implementation& impl, const AttentionInputs& inputs, const CaseDescription& description,
                      const DeviceInputs* device, const JudgeOptions& options = {});

}  // namespace fc

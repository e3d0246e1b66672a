#pragma once
#include <optional>
// Compares every captured stage output with its end-to-end and stage-local reference, head
// by head in parallel, and folds the per-head metrics in (b, h, row, col) order.
#include <vector>

#include "harness/trace/row_sample.h"
#include "harness/trace/session.h"
#include "harness/trace/stage_reference.h"
#include "reference/head_kv_cache.h"
#include "reports/case_result.h"

namespace fc {

// Per output, the references it was compared with, as whole FP64 tensors of its dims.
struct OutputReferences {
  // Empty when not compared.
  HostTensor end_to_end, end_to_end_bound, end_to_end_tight, local, local_bound, local_tight;
};

// Head (b, h) of every stage output the run captured on the host, exact, in FP64: the
// kernel's values where they exist (stages/stage.h, existing_extent), the end-to-end
// reference's `e2e` elsewhere, so that nothing past a sequence's lengths (never written by a
// kernel that reads the packed layout) reaches a stage-local reference of a row that exists.
// `rows`, when given: only those query rows (a row sample), in that order, as `e2e` holds them.
// `ev`, when given, evaluated `e2e` and receives the quantities where it works (resident).
QuantityMap captured_quantities(const Problem& problem, const TraceRun& run, std::int64_t b, std::int64_t h,
                                const QuantityMap& e2e, const std::vector<std::int64_t>* rows = nullptr,
                                const HeadEvaluator* ev = nullptr);

// One head's comparison of one stage output, over the part that exists: `kernel` holds the
// head's captured outputs (captured_quantities), `e2e` its end-to-end reference.
struct OutputComparison {
  Metrics end_to_end, local;
  const Bounded* end_to_end_reference = nullptr;  // in the `e2e` map compared with
  Bounded local_reference;
};
// `local` is the head's stage-local reference: one for all of a head's outputs, so that a
// stage's outputs share its evaluation. compare_outputs compares many outputs of the head at
// once (their stage-local references evaluated as one batch, every metric read back at once).
OutputComparison compare_output(const HeadEvaluator& ev, const Problem& problem, const StageGraph& graph,
                                const QuantityMap& e2e, const QuantityMap& kernel, const LocalReference& local,
                                const Stage& stage, const StageOutput& output, const HeadSpot& spot,
                                BoundChoice judged_by);
std::vector<OutputComparison> compare_outputs(const HeadEvaluator& ev, const Problem& problem, const StageGraph& graph,
                                             const QuantityMap& e2e, const QuantityMap& kernel,
                                             const LocalReference& local,
                                             const std::vector<LocalReference::OutputRef>& outputs,
                                             const std::vector<HeadSpot>& spots, BoundChoice judged_by);

// `references`, when given, receives one entry per captured output (for snapshots; rows
// a sample leaves out stay 0). `sample`, when given and not `all`, limits every comparison
// to its rows. A head larger than `block_elements` is judged in blocks of rows
// (kRowBlockElements, reference/attention.h). `only_reference`: compare that captured output
// alone and keep its references and the bound that decides (attribution needs the failing
// one's; six FP64 tensors of every output would be the largest thing a long-context run
// holds); the other results are then not compared. `source` evaluates the references: on
// the host, or on a GPU (reference/gpu/). `kv`, when given, hands the heads' K and V from block
// to block under ids that stay the same from call to call, and keeps them as its Keep says
// (HeadKvCache::Keep); without it, a cache of this call's keeps a head's while blocks need them.
// `profile`, when given, receives the seconds of each step of the evaluation
// (core/step_profile.h; the device's queued work finished between steps).
std::vector<OutputResult> evaluate_outputs(const AttentionInputs& inputs, const TraceRun& run,
                                           std::vector<OutputReferences>* references = nullptr,
                                           BoundChoice judged_by = BoundChoice::tight,
                                           const RowSample* sample = nullptr,
                                           std::int64_t block_elements = kRowBlockElements,
                                           std::optional<std::size_t> only_reference = std::nullopt,
                                           const EvaluatorSource& source = host_evaluators(),
                                           HeadKvCache* kv = nullptr, StepProfile* profile = nullptr);

}  // namespace fc

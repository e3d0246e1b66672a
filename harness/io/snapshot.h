#pragma once
// Snapshots and fixtures (docs/snapshot-format.md): one traced case of one implementation
// in the project's HDF5 schema. Besides the header, /meta and /inputs of every file:
//   /graph                    the stage graph: algorithm and arithmetic (attributes)
//   /stages/<output name>/    one group per stage output, in execution order (`index`):
//       data                  the captured tensor, in the format the kernel stored it
//       reference, bound, tight           the end-to-end reference and its bounds (FP64)
//       local_reference, local_bound, local_tight   the stage-local ones
//   /production/<n>/          the production build's results (data, flags, metrics)
//       attributes            stage, flags, comparison metrics, verdict
//   /descriptors/<k>          each cuBLASLt call: record (JSON text), lint findings
//   /result                   verdict, reason; /result/first_divergence
// A fixture is a snapshot whose /result is what replaying it must reproduce.
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/io/case_file.h"
#include "harness/trace/evaluate.h"

namespace fc {

struct SnapshotOptions {
  std::string kind = "snapshot";       // or "fixture"
  std::string fault;                   // the fault injected in the run, if any
  // Outputs whose tensors are stored: empty for all, else names or stage kinds ("pv",
  // "softmax[0]", "normalize"); the others keep their flags and metrics only.
  std::vector<std::string> stages;
  // Store the reference tensors of the final output only (fixtures: the expected result;
  // replay recomputes every reference anyway). Otherwise of every stored output.
  bool final_reference_only = false;
};

void write_snapshot(const std::string& path, const std::string& command, const AttentionInputs& inputs,
                    const TraceRun& run, const CaseResult& result, const std::vector<OutputReferences>& references,
                    const SnapshotOptions& options);

struct Snapshot {
  CaseFile file;        // kind, description, inputs
  std::string impl, fault;
  TraceRun run;         // graph, captures (tensors where stored), buffer names, lint findings
  CaseResult recorded;  // verdict, reason, first divergence as written
};

// Every problem (not a snapshot, a stage group missing or malformed, a tensor of the wrong
// shape) is one fc::Error naming the file and the object.
Snapshot read_snapshot(const H5Reader& in);

// f(), a judgement of the run read from snapshot `path`: a stage its graph has no place for,
// which read_snapshot's checks let through, is that file's error (one line naming it), not an
// internal one.
template <class F>
auto judged_from_file(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::out_of_range& e) {
    throw file_error(path, std::string("its stages do not fit its /graph (") + e.what() + ")");
  }
}

// Does an output name match a --snapshot-stages entry?
bool stage_selected(const std::vector<std::string>& selection, const std::string& output_name);

// Every output name of a graph ("qk", "softmax[3].max", ...), appended to `names`.
void add_output_names(const StageGraph& graph, std::vector<std::string>& names);
// Refuses (fc::Error naming `option`) an entry that selects none of `outputs`, listing the
// stage kinds there are.
void require_selections(const std::string& option, const std::vector<std::string>& selection,
                        const std::vector<std::string>& outputs);

}  // namespace fc

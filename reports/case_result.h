#pragma once
// What judging one implementation on one case produced: per stage output its flags and its
// end-to-end and stage-local comparison, the verdict, and the first divergence with its
// cause. Every writer in reports/ reads this and nothing else.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/compare.h"
#include "stages/descriptor_report.h"
#include "stages/flags.h"
#include "stages/stage.h"

namespace fc {

enum class Verdict : std::uint8_t { pass, diverged, error, skipped };
const char* verdict_name(Verdict v);

struct OutputResult {
  std::string name;        // "softmax[3].max"
  std::string stage_name;  // "softmax[3]"
  StageKind kind = StageKind::qk;
  int split = -1, tile = -1;
  Quantity quantity = Quantity::scores;
  DType dtype = DType::f32;
  double value_scale = 1.0;  // stored value times this is the quantity (stages/stage.h)
  Dims dims;
  std::int64_t col_offset = 0;  // global key index of column 0 (tiles), for key-indexed quantities
  bool present = false;         // captured by the implementation
  std::string capture_problem;  // set when the capture disagreed with the declaration
  FlagCounts flags;             // first indices: logical row-major indices into dims
  bool compared = false;        // end_to_end and local hold comparisons
  Metrics end_to_end, local;
  // A result of the production build's run (after every output of the trace build): its
  // `local` comparison is with the trace build's same output, bit for bit.
  bool production = false;
  bool compared_with_trace = false;

  bool passed() const;
  // (b, h, row, col) of a logical index into dims; col -1 for row quantities.
  Index4 index_of(unsigned long long flat) const;
};

struct RowContext {
  double row_max = 0, row_sum = 0;  // of the reference over the whole row
  std::int64_t attended = 0, keys = 0;
  double largest_product = 0;           // the largest q.k over its attended keys, before the scale (an
                                        // overflow to +inf makes the softmax NaN; one to -inf masks a key)
  std::int64_t attended_in_format = 0;  // attended keys whose bias the input format holds (not -inf once rounded)
  bool masked() const { return attended == 0; }
};

struct Divergence {
  std::string stage, output;  // "softmax[0]", "softmax[0].max"
  std::string kind;           // stage kind name
  int split = -1, page = -1;
  Index4 index;
  std::string cause;     // a stable cause id (docs/json-output.md)
  std::string evidence;  // one sentence a person reads
  bool stage_local = false;  // found by the stage-local comparison (else end to end or flags)
  std::optional<double> kernel, reference, bound, tight;
  bool kernel_unwritten = false;  // the kernel element still holds its buffer's poison: never written, not a computed NaN
  std::optional<RowContext> row;
};

struct CaseDescription {
  std::string label;  // "B2 H4 S128 D64 fp16 causal normal seed 1"
  Shape shape;
  DType dtype = DType::f16;
  std::string mask, dist, source;
  std::optional<std::uint64_t> seed;
  double scale = 0;
};

struct CaseResult {
  std::string impl;
  CaseDescription description;
  std::string algorithm;
  std::string coverage;  // which rows were compared, when not every row (--rows)
  std::string reference_device;  // where the FP64 reference ran: "cpu" or "gpu" (empty: not judged)
  std::int64_t window_rows = 0;  // > 0: the trace build ran in windows of this many query rows
  Verdict verdict = Verdict::pass;
  std::string reason;  // for error and skipped
  std::vector<OutputResult> outputs;
  std::optional<Divergence> divergence;
  std::vector<DescriptorReport> descriptors;  // cuBLASLt calls, read back and linted
  double seconds = 0;
  // Where the seconds went: the trace build's run (its captures included), the production
  // build's, the FP64 reference and comparison of every output, attribution of a divergence,
  // and the re-run that tests an unexplained one for a race.
  struct Phases {
    double traced_run = 0, production_run = 0, evaluation = 0, attribution = 0, repeatability = 0;
  } phases;
  // With --profile-evaluation: the evaluation's steps (core/step_profile.h), thread-seconds
  // each, the device's queued work finished between steps.
  std::vector<std::pair<std::string, double>> evaluation_steps;
};

// The same first divergence: the same stage output and cause, and with_index the same element.
bool same_divergence(const std::optional<Divergence>& a, const std::optional<Divergence>& b, bool with_index);

}  // namespace fc

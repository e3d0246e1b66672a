#include "harness/trace/attribute.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"
#include "reference/attention.h"
#include "stages/flags.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kDiagnosisElements = std::int64_t{1} << 28;  // 2 GiB an FP64 tensor


// The logical row-major index of an element of a [B,H,R] or [B,H,R,C] output.
std::int64_t flat_of(const Dims& dims, const Index4& i) {
  const std::int64_t row = (i.b * dims[1] + i.h) * dims[2] + i.row;
  return dims.size() == 4 ? row * dims[3] + std::max<std::int64_t>(i.col, 0) : row;
}

// The outputs of the trace build, which come first: the production build's results follow
// them, and have no capture in run.captured.
std::size_t traced_outputs(const TraceRun& run, const std::vector<OutputResult>& outputs) {
  return std::min(run.captured.size(), outputs.size());
}

// Was the buffer an output lives in written by an earlier captured stage of this run? (Not
// known for an output whose buffer is not known, id 0.)
bool written_before(const TraceRun& run, std::size_t captured_index) {
  const int id = run.captured[captured_index].view.buffer_id;
  if (id <= 0) return false;
  for (std::size_t i = 0; i < captured_index; ++i) {
    const Captured& c = run.captured[i];
    if (c.present && c.view.buffer_id == id && c.flags.unwritten == 0) return true;
  }
  return false;
}

Failure failure_of(const Metrics& m, bool stage_local) {
  const ElementReport& e = *m.first_over();
  return {e, stage_local, m.judged_by == BoundChoice::tight ? e.tight : e.bound};
}


// Where element `at` of output r sits in its capture's storage (a capture of a window of rows
// holds those alone), or -1 where the capture does not hold it.
std::int64_t stored_index(const Captured& c, const OutputResult& r, const Index4& at) {
  const HostTensor& t = c.tensor;
  const Dims& d = t.dims();
  const std::int64_t row = held_row(c, at.row);
  if (t.empty() || at.b < 0 || row < 0 || (d.size() != 3 && d.size() != 4)) return -1;
  std::int64_t flat = (at.b * d[1] + at.h) * d[2] + row;
  if (d.size() == 4) {
    const std::int64_t col = at.col - r.col_offset;
    if (col < 0 || col >= d[3]) return -1;
    flat = flat * d[3] + col;
  }
  return flat < t.numel() ? flat : -1;
}

// The score of the failing element's row and column, when a scores stage was captured.
std::optional<double> captured_score(const TraceRun& run, const std::vector<OutputResult>& outputs,
                                     const OutputResult& failing, const Index4& at) {
  for (std::size_t i = 0; i < traced_outputs(run, outputs); ++i) {
    const OutputResult& r = outputs[i];
    if (r.quantity != Quantity::scores || r.split != failing.split || r.tile != failing.tile) continue;
    const std::int64_t at_stored = stored_index(run.captured[i], r, at);
    if (at_stored < 0) return std::nullopt;
    return run.captured[i].tensor.get(at_stored) * r.value_scale;
  }
  return std::nullopt;
}

// Whether output i's row of the failing element holds what a row whose max went +inf leaves:
// a row max of +inf (or NaN), a NaN sum or lse; NaN in every feature of an accumulator or
// output; over the keys, NaN where exp(inf - inf) was taken and 0 elsewhere (exp(s - inf), a
// masked key, a padded column), nothing else.
bool row_shows_nan_softmax(const TraceRun& run, const OutputResult& r, std::size_t i, const Index4& at) {
  if (i >= run.captured.size()) return false;
  const Captured& c = run.captured[i];
  const Dims& d = c.tensor.dims();
  if (c.tensor.empty()) return false;
  const bool keys = r.quantity == Quantity::scores || r.quantity == Quantity::probs || r.quantity == Quantity::p_tilde;
  const std::int64_t cols = d.size() == 4 ? d[3] : 1;
  for (std::int64_t col = 0; col < cols; ++col) {
    Index4 e = at;
    if (d.size() == 4) e.col = r.col_offset + col;
    const std::int64_t s = stored_index(c, r, e);
    if (s < 0) return false;
    const double x = c.tensor.get(s);
    const bool fits = std::isnan(x) || (d.size() == 3 && x == kInf) || (keys && x == 0);
    if (!fits) return false;
  }
  return true;
}

// Whether the trace build captured a finite lse for the failing element's row: its softmax
// did not go NaN.
bool captured_lse_finite(const TraceRun& run, const std::vector<OutputResult>& outputs, const Index4& at) {
  for (std::size_t i = 0; i < traced_outputs(run, outputs); ++i) {
    if (outputs[i].quantity != Quantity::lse) continue;
    const std::int64_t s = stored_index(run.captured[i], outputs[i], {at.b, at.h, at.row, -1});
    if (s >= 0 && std::isfinite(run.captured[i].tensor.get(s))) return true;
  }
  return false;
}

// Whether the run captured a scores stage: then the scores were judged (and passed, for a
// divergence after them) as the kernel stored them.
bool scores_captured(const TraceRun& run, const std::vector<OutputResult>& outputs) {
  for (std::size_t i = 0; i < outputs.size() && i < run.captured.size(); ++i) {
    if (outputs[i].quantity == Quantity::scores && run.captured[i].present && !run.captured[i].tensor.empty()) return true;
  }
  return false;
}

// The cause a lint finding names: a descriptor cuBLASLt rejected or that disagrees with the
// compute type; a layout that does not fit the buffer; a beta that reads unwritten memory.
std::string cause_of_lint(const std::string& rule) {
  if (rule == lint_rule::set_status || rule == lint_rule::scale_type) return "descriptor-invalid";
  if (rule == lint_rule::beta_uninitialized) return "stale-accumulator";
  return "layout-mismatch";
}

// The earlier capture from the same buffer, if this output holds exactly its bytes: the
// stage never rewrote the buffer.
std::optional<std::size_t> unchanged_since(const TraceRun& run, std::size_t i) {
  const Captured& now = run.captured[i];
  if (now.tensor.empty() || now.view.buffer_id <= 0) return std::nullopt;
  for (std::size_t j = i; j-- > 0;) {
    const Captured& before = run.captured[j];
    if (!before.present || before.view.buffer_id != now.view.buffer_id) continue;
    if (before.tensor.dims() == now.tensor.dims() && before.tensor.nbytes() == now.tensor.nbytes() &&
        std::memcmp(before.tensor.data(), now.tensor.data(), now.tensor.nbytes()) == 0) {
      return j;
    }
    return std::nullopt;  // the latest capture of the buffer differs
  }
  return std::nullopt;
}

// A combine whose row had a split with no key: that split's partial lse is -inf.
bool row_has_empty_split(const TraceRun& run, const std::vector<OutputResult>& outputs, const Index4& at) {
  for (std::size_t i = 0; i < traced_outputs(run, outputs); ++i) {
    const OutputResult& r = outputs[i];
    if (r.quantity != Quantity::partial_lse) continue;
    const std::int64_t at_stored = stored_index(run.captured[i], r, at);
    if (at_stored >= 0 && run.captured[i].tensor.get(at_stored) == -kInf) return true;
  }
  return false;
}

// Does element `at` of output i still hold its own buffer's poison (a NaN no stage computed)?
bool holds_own_poison(const TraceRun& run, std::size_t i, const OutputResult& r, const Index4& at) {
  const HostTensor& t = run.captured[i].tensor;
  const std::int64_t flat = stored_index(run.captured[i], r, at);
  if (flat < 0) return false;
  const std::uint32_t bits = dtype_size(t.dtype()) == 4 ? t.data_as<std::uint32_t>()[flat]
                             : dtype_size(t.dtype()) == 2 ? t.data_as<std::uint16_t>()[flat]
                                                          : 0u;
  const int id = run.captured[i].view.buffer_id;
  return id > 0 && dtype_size(t.dtype()) >= 2 && poison_id(t.dtype(), bits) == id;
}

// An in-place stage (rescale, P.V with beta = 1) that read its buffer before any stage wrote
// it. Its output then holds poison: NVIDIA arithmetic turns it into the canonical NaN, x86
// keeps the payload (so it reads as unwritten); either way the read is the cause.
bool in_place_read_of_unwritten(Divergence& d, const TraceRun& run, std::size_t i, const OutputResult& r) {
  const Stage& stage = run.graph.stages[run.captured[i].stage];
  // Which buffer it read, and whether a stage wrote it first, is known only for a poisoned one.
  if (!stage.reads_own_output || run.captured[i].view.buffer_id <= 0 || written_before(run, i)) return false;
  const std::string buffer = run.buffer_names.at(static_cast<std::size_t>(run.captured[i].view.buffer_id));
  if (stage.kind == StageKind::pv) {
    d.cause = "stale-accumulator";
    d.evidence = r.stage_name + " accumulated into '" + buffer +
                 "' (beta = 1) before any stage wrote it, so the sum starts from stale memory (at " +
                 at_text(d.index) + ")";
  } else {
    d.cause = "uninitialized-read";
    d.evidence = r.stage_name + " read '" + buffer + "' before any stage wrote it: " +
                 (holds_own_poison(run, i, r, d.index) ? "scaling it left the unwritten memory's poison at "
                                                       : "scaling uninitialized memory gave NaN at ") +
                 at_text(d.index);
  }
  return true;
}

Divergence start(const OutputResult& r) {
  Divergence d;
  d.stage = r.stage_name;
  d.output = r.name;
  d.kind = stage_kind_name(r.kind);
  d.split = r.split;
  d.page = r.tile;
  return d;
}

void name_cause(Divergence& d, const AttentionInputs& inputs, const TraceRun& run, const std::vector<OutputResult>& outputs,
                const ReferenceSource& references, std::size_t i, const Failure& f, const RowSample* rows) {
  const OutputResult& r = outputs[i];
  const double k = f.element.kernel, ref = f.element.reference;
  const bool bad_value = !std::isfinite(k) && std::isfinite(ref);
  const RowContext row = *d.row;

  if (const std::optional<std::size_t> earlier = unchanged_since(run, i)) {
    // An in-place rescale that left the accumulator bit for bit as it was, where the reference
    // rescales it (this element is wrong): the rescale was skipped, a factor of 1.
    if (r.kind == StageKind::rescale && std::isfinite(k) && std::isfinite(ref)) {
      d.cause = "rescale-error";
      d.evidence = r.stage_name + " left '" + run.buffer_names.at(static_cast<std::size_t>(run.captured[i].view.buffer_id)) +
                   "' bit for bit as " + outputs[*earlier].name + " wrote it: the accumulator was not rescaled (" +
                   number_text(k) + " at " + at_text(d.index) + ", rescaled by the running max's change it is " +
                   number_text(ref) + ")";
      return;
    }
    d.cause = "unwritten-output";
    d.evidence = r.stage_name + " did not write '" +
                 run.buffer_names.at(static_cast<std::size_t>(run.captured[i].view.buffer_id)) + "': it still holds " +
                 outputs[*earlier].name + "'s values (" + number_text(k) + " at " + at_text(d.index) + ", reference " +
                 number_text(ref) + ")";
    return;
  }

  if (bad_value && r.kind == StageKind::combine && row_has_empty_split(run, outputs, d.index)) {
    d.cause = "combine-empty-split";
    d.evidence = "the combine produced " + number_text(k) + " at " + at_text(d.index) + ", a row with a split whose " +
                 "every key is masked (partial lse -inf): such a split must get weight 0, and a row with no key 0";
    return;
  }
  const std::string row_of =
      "row " + std::to_string(d.index.row) + " of b=" + std::to_string(d.index.b) + " h=" + std::to_string(d.index.h);
  // Every key of the row masked by a finite bias the input format cannot hold (float32's most
  // negative value in an fp16 kernel): rounded to the format, the row has no key.
  if (bad_value && r.kind != StageKind::qk && !scores_captured(run, outputs) && !row.masked() &&
      row.attended_in_format == 0) {
    d.cause = "fully-masked-row";
    d.evidence = row_of + " masks each of its " + std::to_string(row.attended) +
                 " keys with a finite bias beyond " + dtype_name(inputs.problem.dtype) + "'s range: rounded to " +
                 dtype_name(inputs.problem.dtype) + " every one is -inf, the row has no key, and exp(-inf - (-inf)) gave " +
                 number_text(k) + " in " + r.stage_name + " (a finite-bias mask such as float32's min needs the kernel's format's min)";
    return;
  }
  // Key-indexed quantities are left to the mask hypotheses: there a -inf reference is a masked
  // key, and a finite score in its place a mask the kernel did not apply.
  const bool key_indexed = r.quantity == Quantity::scores || r.quantity == Quantity::probs || r.quantity == Quantity::p_tilde;
  if (row.masked() && (bad_value || (!key_indexed && !std::isfinite(ref)))) {
    d.cause = "fully-masked-row";
    const std::string row_text = row_of + " has no key to attend to (all " +
                                 std::to_string(row.keys) + " masked): ";
    // A row quantity whose reference is not finite there holds the convention for such a row (a
    // max or lse of -inf): the kernel keeps another one.
    d.evidence = bad_value ? row_text + "the row max is -inf and exp(-inf - (-inf)) gave " + number_text(k) + " in " +
                                 r.stage_name
                           : row_text + r.stage_name + " holds " + number_text(k) + " where the convention for such a row is " +
                                 number_text(ref) +
                                 (k == kInf ? " (FlashAttention-2 writes an lse of +inf there, so that its backward's "
                                                   "exp(s - lse) is 0)"
                                                 : "");
    return;
  }
  // Out of range only when a value really exceeds the format it is stored in: the score, or
  // (an infinity of the score's sign) the unscaled product q.k a GEMM stores before the scale.
  // A -inf where neither is out of range is a mask, tested by the hypotheses below.
  // fp16 scores saved wider (upcast to fp32) overflow where fp16 does: a +inf where the score
  // or q.k is beyond fp16's range. Only +inf: a -inf in fp32 scores may as well be a mask, and
  // the hypotheses weigh the head's every bad element, not this one alone. (bf16 has fp32's
  // range: nothing narrower to form it in.)
  if (r.kind == StageKind::qk && std::isfinite(ref)) {
    const double unscaled = ref / inputs.problem.scale;
    const bool stored_inf = std::isinf(k) && (k > 0) == (ref > 0);
    const auto beyond = [&](DType format) {
      return std::fabs(ref) > max_finite(format) || std::fabs(unscaled) > max_finite(format);
    };
    std::optional<DType> overflowed;  // the format the score or q.k went past
    if (std::fabs(ref) > max_finite(r.dtype) || (stored_inf && beyond(r.dtype))) {
      overflowed = r.dtype;
    } else if (inputs.problem.dtype == DType::f16 && max_finite(DType::f16) < max_finite(r.dtype) && k == kInf &&
               ref > 0 && beyond(DType::f16)) {
      overflowed = DType::f16;
    }
    if (overflowed) {
      const double largest = max_finite(*overflowed);
      const std::string format = dtype_name(*overflowed);
      const std::string stored = *overflowed == r.dtype ? "" : std::string(" (stored as ") + dtype_name(r.dtype) + ")";
      d.cause = "score-overflow";
      d.evidence = std::fabs(ref) > largest
                       ? "the score at " + at_text(d.index) + " is " + number_text(ref) + " but the kernel stored " +
                             number_text(k) + stored + ": it overflows " + format + " (largest finite " +
                             number_text(largest) + ")"
                       : "the score at " + at_text(d.index) + " is " + number_text(ref) + ", but before the scale " +
                             number_text(inputs.problem.scale) + " it is " + number_text(unscaled) + ", beyond " + format +
                             "'s " + number_text(largest) + ": the kernel stored " + number_text(k) + stored +
                             " (is q.k formed in " + format + " before it is scaled?)";
      return;
    }
  }
  // A stage after the scores with nothing finite where the reference is: the row's scores, or
  // q.k before the scale, beyond the 16-bit input format. A kernel that forms them in that
  // format gets an infinity, and the softmax of the row NaN; its scores were not captured (a
  // bug report's output alone), so the scores' own check could not name it. The row must show
  // it (row_shows_nan_softmax), and no finite lse be captured for it: one bad element among
  // finite ones, or the infinities of an overflowing P.V, are something else.
  const double input_largest = max_finite(inputs.problem.dtype);
  // Only a positive overflow: +inf is the row's max and exp(inf - inf) NaN; a -inf masks a key.
  const double scale = inputs.problem.scale, largest_score = row.largest_product * std::max(1.0, scale);
  if (bad_value && r.kind != StageKind::qk && !scores_captured(run, outputs) && !row.masked() &&
      dtype_size(inputs.problem.dtype) == 2 && largest_score > input_largest && row_shows_nan_softmax(run, r, i, d.index) &&
      !captured_lse_finite(run, outputs, d.index)) {
    const std::string format = dtype_name(inputs.problem.dtype);
    // With a scale above 1 the scaled score overflows first.
    const bool scaled = scale > 1 && row.largest_product <= input_largest;
    d.cause = "score-overflow";
    d.evidence = row_of + (scaled ? " has a score of " + number_text(largest_score) + " (q.k " +
                                        number_text(row.largest_product) + " times the scale " + number_text(scale) + ")"
                                  : " has a product q.k of " + number_text(row.largest_product) + " before the scale " +
                                        number_text(scale)) +
                 ", beyond " + format + "'s " + number_text(input_largest) + ": formed in " + format +
                 " it is an infinity, and the row's softmax NaN; " + r.stage_name + " holds " + number_text(k) +
                 (scaled ? " (are the scores formed in " + format + "?)"
                         : " (is q.k formed in " + format + " before it is scaled?)");
    return;
  }
  if (bad_value && r.kind == StageKind::softmax && row.row_max > kFp32ExpOverflow) {
    const std::optional<double> s = captured_score(run, outputs, r, d.index);
    d.cause = "exp-overflow";
    d.evidence = "exp overflowed in " + r.stage_name + " at " + at_text(d.index) + ": the row max is " +
                 number_text(row.row_max) + (s ? ", the score " + number_text(*s) : std::string()) +
                 ", and exp of more than 88.7 exceeds fp32 (is the row max subtracted before exp?)";
    return;
  }
  // Hypotheses tested on the numbers (harness/trace/hypotheses/): the best explanation of
  // at least 90% of the failing head's bad elements names the cause.
  // They hold the output's FP64 references (four tensors of its size) and the failing head in
  // FP64: past kDiagnosisElements that would be the largest thing the run holds, so a larger
  // output is not diagnosed (its evidence says so) rather than risk the host's memory.
  const std::int64_t elements = numel_of(r.dims);
  Explanation best;
  if (elements <= kDiagnosisElements) {
    best = best_explanation(
        test_hypotheses(make_diagnosis(inputs, run, outputs, references(i), i, d.index, f.stage_local, rows)));
  } else {
    best = {"unknown", 0,
            "hypotheses not tested: " + r.name + " has " + std::to_string(elements) + " elements, more than the " +
                std::to_string(kDiagnosisElements) + " whose FP64 references a diagnosis holds"};
  }
  if (!best.cause.empty() && best.cause != "unknown") {
    d.cause = best.cause;
    d.evidence = best.evidence;
    return;
  }
  // An infinity, or a zero, that no hypothesis explains, where the reference is finite and
  // representable and every earlier captured stage passed: it arose inside this stage.
  const bool masked_score = r.kind == StageKind::qk && k == -kInf;  // a mask's, tested above
  if (std::isinf(k) && !masked_score && std::isfinite(ref) && std::fabs(ref) <= max_finite(r.dtype) &&
      (ref == 0 || (k > 0) == (ref > 0))) {
    d.cause = "overflow";
    d.evidence = r.name + " holds " + number_text(k) + " at " + at_text(d.index) + " where the reference is " +
                 number_text(ref) + ", within " + dtype_name(r.dtype) + "'s range, and every earlier stage passed: a " +
                 "value formed inside " + r.stage_name + " overflowed (an exp, a sum or a product of its inputs)";
    return;
  }
  if (k == 0 && ref != 0 && std::isfinite(ref) && std::fabs(ref) < min_normal(r.dtype)) {
    d.cause = "underflow";
    d.evidence = r.name + " holds 0 at " + at_text(d.index) + " where the reference is " + number_text(ref) +
                 ", subnormal in " + dtype_name(r.dtype) + ": flushed to zero (or an intermediate underflowed) in " +
                 r.stage_name;
    return;
  }
  d.cause = "unknown";
  d.evidence = r.name + " holds " + number_text(k) + " at " + at_text(d.index) + " where the reference is " + number_text(ref) +
               (std::isfinite(k) && f.bound > 0
                    ? " (" + number_text(std::fabs(k - ref) / f.bound) + "x the bound)"
                    : std::string()) +
               (best.cause == "unknown" ? "; " + best.evidence : std::string());
}

// A failing result of the production build's run: unwritten, different from its trace
// build's same output (what ships is not what was traced), or wrong like the trace build.
Divergence attribute_production(const TraceRun& run, const OutputResult& r, const Captured& c) {
  Divergence d = start(r);
  d.output = r.name;
  const std::string buffer = run.production.buffer_names.at(static_cast<std::size_t>(c.view.buffer_id));
  if (!r.present || !r.capture_problem.empty()) {
    d.cause = "layout-mismatch";
    d.evidence = "the production build's " + r.name + (r.present ? " was " + r.capture_problem : " was not produced");
    return d;
  }
  if (r.flags.unwritten > 0) {
    d.index = r.index_of(r.flags.first_unwritten);
    d.cause = "unwritten-output";
    d.evidence = "the production build left " + std::to_string(r.flags.unwritten) + " elements of '" + buffer +
                 "' unwritten (its poison remains), the first at " + at_text(d.index) +
                 "; its trace build wrote them";
    return d;
  }
  const bool mismatch = r.compared_with_trace && !r.local.passed();
  const Metrics& m = mismatch ? r.local : r.end_to_end;
  if (const std::optional<ElementReport>& e = m.first_over()) {
    d.index = e->index;
    d.kernel = e->kernel;
    d.stage_local = mismatch;
    // Against the trace build's value (an exact reference: bound 0), or the FP64 reference.
    d.reference = e->reference;
    d.bound = e->bound;
    d.tight = e->tight;
  }
  if (mismatch) {
    d.cause = "trace-build-mismatch";
    d.evidence = "the production kernel differs from its trace build at " + at_text(d.index) + ": production " +
                 number_text(*d.kernel) + ", trace build " + number_text(r.local.first_over()->reference) + "; " +
                 std::to_string(r.local.failures()) + " of " + std::to_string(r.local.elements) +
                 " elements differ (the trace build's stages all passed)";
  } else {
    d.cause = "unknown";
    d.evidence = "the production build's " + r.name + " holds " + number_text(d.kernel.value_or(0)) + " at " +
                 at_text(d.index) + " where the reference is " + number_text(d.reference.value_or(0));
  }
  return d;
}

}  // namespace

std::optional<Failure> failing_element(const OutputResult& r) {
  if (!r.compared) return std::nullopt;
  if (!r.local.passed()) return failure_of(r.local, true);
  if (!r.end_to_end.passed()) return failure_of(r.end_to_end, false);
  return std::nullopt;
}

void name_element(Divergence& d, const Failure& f) {
  d.index = f.element.index;
  d.kernel = f.element.kernel;
  d.reference = f.element.reference;
  d.bound = f.element.bound;
  d.tight = f.element.tight;
  d.stage_local = f.stage_local;
}

std::optional<InputDefect> find_input_defect(const AttentionInputs& inputs) {
  const std::pair<const char*, const HostTensor*> tensors[] = {{"q", &inputs.q}, {"k", &inputs.k}, {"v", &inputs.v}};
  for (const auto& [name, t] : tensors) {
    for (std::int64_t i = 0; i < t->numel(); ++i) {
      const double x = t->get(i);
      if (std::isfinite(x)) continue;
      return InputDefect{name, std::isnan(x), i, index_in(t->dims(), i)};
    }
  }
  return std::nullopt;
}

RowContext row_context(const AttentionInputs& inputs, std::int64_t b, std::int64_t h, std::int64_t row) {
  const Shape& s = inputs.problem.shape;
  const HeadInputs in = head_inputs(inputs, b, h, std::vector<std::int64_t>{row});  // this row only: O(Sk), not O(S·Sk)
  RowContext ctx;
  ctx.keys = s.kv_len;
  ctx.row_max = -kInf;
  for (std::int64_t j = 0; j < s.kv_len; ++j) {
    const double bias = in.bias(0, j);
    if (bias == -kInf) continue;
    ++ctx.attended;
    ctx.attended_in_format += bias >= -max_finite(inputs.problem.dtype);
    const double product = in.q.row(0).dot(in.k().row(j));
    ctx.largest_product = ctx.attended == 1 ? product : std::max(ctx.largest_product, product);
    ctx.row_max = std::max(ctx.row_max, in.scale * product + bias);
  }
  for (std::int64_t j = 0; j < s.kv_len && ctx.attended > 0; ++j) {
    const double bias = in.bias(0, j);
    if (bias != -kInf) ctx.row_sum += std::exp(in.scale * in.q.row(0).dot(in.k().row(j)) + bias - ctx.row_max);
  }
  return ctx;
}

namespace {

std::optional<Divergence> first_divergence(const AttentionInputs& inputs, const TraceRun& run,
                                           const std::vector<OutputResult>& outputs,
                                           const ReferenceSource& references, const RowSample* rows) {
  for (std::size_t i = 0; i < run.captured.size(); ++i) {
    const OutputResult& r = outputs[i];
    const std::size_t stage = run.captured[i].stage;
    if (run.captured[i].output == 0) {  // lint findings of this stage's cuBLASLt calls come first
      for (const DescriptorReport& report : run.descriptors) {
        if (report.stage != stage || report.findings.empty()) continue;
        const LintFinding& finding = report.findings.front();
        Divergence d = start(r);
        d.output = r.name;
        d.cause = cause_of_lint(finding.rule);
        d.evidence = "cuBLASLt " + report.record.name + ": " + finding.message + " (lint rule " + finding.rule +
                     (report.launched ? ")" : "; the call was not launched)");
        if (const std::optional<Failure> f = failing_element(r)) {
          name_element(d, *f);
          d.stage_local = false;  // a lint finding, whichever comparison failed
        }
        return d;
      }
    }
    if (r.passed()) continue;
    Divergence d = start(r);
    if (!r.present) {
      d.cause = "unknown";
      d.evidence = "the implementation declared " + r.name + " but never captured it";
      return d;
    }
    if (!r.capture_problem.empty()) {
      d.cause = "layout-mismatch";
      d.evidence = r.name + " was " + r.capture_problem;
      return d;
    }
    const std::optional<Failure> f = failing_element(r);
    // Never written from exactly the first row whose offset passes 2^16, 2^31 or 2^32, and wrong
    // before it: those rows went over earlier ones. (Whole outputs only: a tile's view is a
    // slice of its buffer, whose offsets the kernel computes, not the view's.)
    const Stage& whole = run.graph.stages[stage];
    if (r.flags.unwritten > 0 && whole.tile < 0 && whole.split < 0 && f &&
        flat_of(r.dims, f->element.index) < static_cast<std::int64_t>(r.flags.first_unwritten)) {
      const auto first = static_cast<std::int64_t>(r.flags.first_unwritten);
      if (const std::optional<std::string> wrap = index_wrap_at(r.dims, r.dtype, first)) {
        d.index = r.index_of(r.flags.first_unwritten);
        d.cause = "index-overflow";
        d.evidence = std::to_string(r.flags.unwritten) + " elements of " + r.name + " were never written, the first at " +
                     at_text(d.index) + ": " + *wrap + "; the first wrong value is at " + at_text(f->element.index) +
                     " (" + number_text(f->element.kernel) + ", reference " + number_text(f->element.reference) + ")";
        return d;
      }
    }
    if ((r.flags.unwritten > 0 || r.flags.nan > 0) && (!f || !std::isfinite(f->element.kernel))) {
      if (f) {
        name_element(d, *f);
      } else {
        d.index = r.index_of(r.flags.unwritten > 0 ? r.flags.first_unwritten : r.flags.first_nan);
      }
      if (in_place_read_of_unwritten(d, run, i, r)) return d;
    }
    if (r.flags.unwritten > 0 && (!f || !std::isfinite(f->element.kernel))) {
      d.index = r.index_of(r.flags.first_unwritten);
      d.cause = "unwritten-output";
      d.evidence = std::to_string(r.flags.unwritten) + " elements of " + r.name + " were never written ('" +
                   run.buffer_names.at(static_cast<std::size_t>(run.captured[i].view.buffer_id)) +
                   "' still holds its poison), the first at " + at_text(d.index);
      return d;
    }
    if (r.flags.foreign_poison > 0) {
      d.index = r.index_of(r.flags.first_foreign_offset());
      d.cause = "uninitialized-read";
      d.evidence = r.name + " holds the poison of buffer '" +
                   run.buffer_names.at(static_cast<std::size_t>(r.flags.foreign_source())) + "' at " +
                   at_text(d.index) + ": it copied memory that no stage wrote";
      return d;
    }
    if (!f) continue;  // unreachable: a failing output has a failing element or a flag above
    name_element(d, *f);
    d.row = row_context(inputs, d.index.b, d.index.h, d.index.row);
    if (const std::optional<InputDefect> defect = find_input_defect(inputs)) {
      d.cause = defect->nan ? "input-nan" : "input-inf";
      d.evidence = "input " + defect->tensor + " holds " + (defect->nan ? "NaN" : "Inf") + " at b=" +
                   std::to_string(defect->at.b) + " h=" + std::to_string(defect->at.h) + " position " +
                   std::to_string(defect->at.row) + " dim " + std::to_string(defect->at.col) + ", which reaches " + r.name;
      return d;
    }
    name_cause(d, inputs, run, outputs, references, i, *f, rows);
    return d;
  }
  for (std::size_t n = 0; n < run.production.results.size(); ++n) {
    const OutputResult& r = outputs.at(run.captured.size() + n);
    if (!r.passed()) return attribute_production(run, r, run.production.results[n]);
  }
  if (!run.production.error.empty()) {
    Divergence d;
    d.stage = d.output = "production";
    d.cause = "trace-build-mismatch";
    d.evidence = "the production build failed where its trace build ran: " + run.production.error;
    return d;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Divergence> attribute(const AttentionInputs& inputs, const TraceRun& run,
                                    const std::vector<OutputResult>& outputs,
                                    const std::vector<OutputReferences>& references, const RowSample* rows) {
  return attribute(inputs, run, outputs, [&references](std::size_t) -> const std::vector<OutputReferences>& {
    return references;
  }, rows);
}

std::optional<Divergence> attribute(const AttentionInputs& inputs, const TraceRun& run,
                                    const std::vector<OutputResult>& outputs, const ReferenceSource& references,
                                    const RowSample* rows) {
  std::optional<Divergence> d = first_divergence(inputs, run, outputs, references, rows);
  if (!d || !d->kernel || !std::isnan(*d->kernel)) return d;
  for (std::size_t i = 0; i < run.captured.size(); ++i) {  // a production result is never poison-checked here
    if (outputs[i].name == d->output) d->kernel_unwritten = holds_own_poison(run, i, outputs[i], d->index);
  }
  return d;
}

}  // namespace fc

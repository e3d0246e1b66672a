#include "reports/json_report.h"

#include <map>

#include "core/json_writer.h"
#include "stages/cublaslt/descriptor_json.h"


namespace fc {
namespace {

void write_index(JsonWriter& j, const Index4& i) {
  j.begin_object().field("b", i.b).field("h", i.h).field("row", i.row).key("col");
  if (i.col >= 0) j.value(i.col); else j.null();
  j.end_object();
}

void write_element(JsonWriter& j, const std::optional<ElementReport>& e) {
  if (!e) {
    j.null();
    return;
  }
  j.begin_object().key("index");
  write_index(j, e->index);
  j.field("kernel", e->kernel).field("reference", e->reference).field("bound", e->bound).field("tight", e->tight);
  j.end_object();
}

void write_metrics(JsonWriter& j, const Metrics& m) {
  j.begin_object()
      .field("elements", m.elements)
      .field("nan_kernel", m.nan_kernel)
      .field("inf_kernel", m.posinf_kernel + m.neginf_kernel)
      .field("nan_reference", m.nan_reference)
      .field("inf_reference", m.inf_reference)
      .field("max_abs_error", m.max_abs_error)
      .field("max_rel_error", m.max_rel_error)
      .field("max_normalized_error", m.max_normalized_error)
      .field("over_bound", m.over_bound)
      .field("max_tight_error", m.max_tight_error)
      .field("over_tight", m.over_tight)
      .field("judged_by", m.judged_by == BoundChoice::tight ? "tight" : "worst-case")
      .field("max_ulp", m.max_ulp);
  j.key("first_failure");
  write_element(j, m.first_failure);
  j.key("first_worst_case_failure");
  write_element(j, m.first_worst_case_failure);
  j.key("worst");
  write_element(j, m.worst);
  j.end_object();
}

void write_flag_index(JsonWriter& j, const OutputResult& r, unsigned long long flat) {
  if (flat == kNoIndex) {
    j.null();
  } else {
    write_index(j, r.index_of(flat));
  }
}

void write_output(JsonWriter& j, const OutputResult& r) {
  j.begin_object()
      .field("name", r.name)
      .field("stage", r.stage_name)
      .field("kind", stage_kind_name(r.kind))
      .field("split", r.split)
      .field("page", r.tile)
      .field("quantity", quantity_name(r.quantity))
      .field("dtype", dtype_name(r.dtype))
      .field("captured", r.present)
      .field("capture_problem", r.capture_problem)
      .field("verdict", r.passed() ? "pass" : "fail");
  const FlagCounts& f = r.flags;
  j.key("flags").begin_object()
      .field("nan", static_cast<std::int64_t>(f.nan))
      .field("pos_inf", static_cast<std::int64_t>(f.pos_inf))
      .field("neg_inf", static_cast<std::int64_t>(f.neg_inf))
      .field("subnormal", static_cast<std::int64_t>(f.subnormal))
      .field("unwritten", static_cast<std::int64_t>(f.unwritten))
      .field("foreign_poison", static_cast<std::int64_t>(f.foreign_poison))
      .field("max_abs", static_cast<double>(f.max_abs()) * r.value_scale);
  j.key("first_nan");
  write_flag_index(j, r, f.first_nan);
  j.key("first_inf");
  write_flag_index(j, r, f.first_inf);
  j.key("first_unwritten");
  write_flag_index(j, r, f.first_unwritten);
  j.end_object();
  j.key("end_to_end");
  if (r.compared) write_metrics(j, r.end_to_end); else j.null();
  j.key("local");
  if (r.compared) write_metrics(j, r.local); else j.null();
  j.end_object();
}

void write_divergence(JsonWriter& j, const std::optional<Divergence>& d) {
  if (!d) {
    j.null();
    return;
  }
  j.begin_object()
      .field("stage", d->stage)
      .field("output", d->output)
      .field("kind", d->kind)
      .field("split", d->split)
      .field("page", d->page);
  j.key("index");
  write_index(j, d->index);
  j.field("cause", d->cause).field("evidence", d->evidence).field("stage_local", d->stage_local);
  j.key("kernel");
  if (d->kernel) j.value(*d->kernel); else j.null();
  j.key("reference");
  if (d->reference) j.value(*d->reference); else j.null();
  j.key("bound");
  if (d->bound) j.value(*d->bound); else j.null();
  j.key("tight");
  if (d->tight) j.value(*d->tight); else j.null();
  j.key("row");
  if (d->row) {
    j.begin_object()
        .field("max", d->row->row_max)
        .field("sum", d->row->row_sum)
        .field("attended", d->row->attended)
        .field("keys", d->row->keys)
        .field("masked", d->row->masked())
        .end_object();
  } else {
    j.null();
  }
  j.end_object();
}

void write_case(JsonWriter& j, const CaseResult& c) {
  const CaseDescription& d = c.description;
  j.begin_object().field("impl", c.impl);
  j.key("case").begin_object().field("label", d.label);
  j.key("shape").begin_object()
      .field("batch", d.shape.batch)
      .field("heads", d.shape.heads)
      .field("q_len", d.shape.q_len)
      .field("kv_len", d.shape.kv_len)
      .field("head_dim", d.shape.head_dim)
      .end_object();
  j.field("dtype", dtype_name(d.dtype)).field("mask", d.mask).field("dist", d.dist).key("seed");
  if (d.seed) j.value(static_cast<std::int64_t>(*d.seed)); else j.null();
  j.field("scale", d.scale).field("source", d.source).end_object();
  j.field("algorithm", c.algorithm).field("coverage", c.coverage.empty() ? std::string("every row") : c.coverage).field("verdict", verdict_name(c.verdict)).field("reason", c.reason);
  j.field("seconds", c.seconds);
  j.key("stages").begin_array();
  for (const OutputResult& r : c.outputs) write_output(j, r);
  j.end_array();
  j.key("first_divergence");
  write_divergence(j, c.divergence);
  j.key("descriptors").begin_array();
  for (const DescriptorReport& d : c.descriptors) {
    j.begin_object().field("stage", static_cast<std::int64_t>(d.stage)).field("launched", d.launched).key("record");
    write_json(j, d.record);
    j.key("findings");
    write_json(j, d.findings);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

}  // namespace

void write_json_report(std::ostream& out, const RunInfo& info, const std::vector<CaseResult>& cases) {
  JsonWriter j(out);
  std::map<std::string, std::int64_t> counts{{"pass", 0}, {"diverged", 0}, {"error", 0}, {"skipped", 0}};
  for (const CaseResult& c : cases) ++counts[verdict_name(c.verdict)];
  j.begin_object()
      .field("tool", "flashcore-check")
      .field("version", info.version)
      .field("json_schema", 3)
      .field("command", info.command)
      .field("device", info.device);
  if (!info.input_findings.empty()) {
    j.key("input_findings").begin_array();
    for (const InputFinding& f : info.input_findings) {
      j.begin_object().field("cause", f.cause).field("tensor", f.tensor).key("index");
      if (f.index) write_index(j, *f.index); else j.null();
      j.field("detail", f.detail).field("defect", f.defect).end_object();
    }
    j.end_array();
  }
  j.key("summary").begin_object();
  for (const auto& [k, v] : counts) j.field(k, v);
  j.end_object();
  j.key("cases").begin_array();
  for (const CaseResult& c : cases) write_case(j, c);
  j.end_array();
  j.end_object();
}

}  // namespace fc

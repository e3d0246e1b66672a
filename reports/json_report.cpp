#include "reports/json_report.h"

#include <map>

#include "core/json.h"
#include "stages/cublaslt/descriptor_json.h"

namespace fc {
namespace {

Json optional_number(const std::optional<double>& v) { return v ? json_number(*v) : Json(nullptr); }

Json index_json(const Index4& i) {
  return Json{{"b", i.b}, {"h", i.h}, {"row", i.row}, {"col", i.col >= 0 ? Json(i.col) : Json(nullptr)}};
}

Json element_json(const std::optional<ElementReport>& e) {
  if (!e) return nullptr;
  Json j;
  j["index"] = index_json(e->index);
  j["kernel"] = json_number(e->kernel);
  j["reference"] = json_number(e->reference);
  j["bound"] = json_number(e->bound);
  j["tight"] = json_number(e->tight);
  return j;
}

Json metrics_json(const Metrics& m) {
  Json j;
  j["elements"] = m.elements;
  j["nan_kernel"] = m.nan_kernel;
  j["inf_kernel"] = m.posinf_kernel + m.neginf_kernel;
  j["nan_reference"] = m.nan_reference;
  j["inf_reference"] = m.inf_reference;
  j["masked_neg_inf"] = m.masked_neg_inf;
  j["max_abs_error"] = json_number(m.max_abs_error);
  j["max_rel_error"] = json_number(m.max_rel_error);
  j["max_normalized_error"] = json_number(m.max_normalized_error);
  j["over_bound"] = m.over_bound;
  j["max_tight_error"] = json_number(m.max_tight_error);
  j["over_tight"] = m.over_tight;
  j["judged_by"] = m.judged_by == BoundChoice::tight ? "tight" : "worst-case";
  j["max_ulp"] = m.max_ulp;
  j["first_failure"] = element_json(m.first_failure);
  j["first_worst_case_failure"] = element_json(m.first_worst_case_failure);
  j["worst"] = element_json(m.worst);
  return j;
}

Json flag_index_json(const OutputResult& r, unsigned long long flat) {
  return flat == kNoIndex ? Json(nullptr) : index_json(r.index_of(flat));
}

Json flags_json(const OutputResult& r) {
  const FlagCounts& f = r.flags;
  Json j;
  j["nan"] = static_cast<std::int64_t>(f.nan);
  j["pos_inf"] = static_cast<std::int64_t>(f.pos_inf);
  j["neg_inf"] = static_cast<std::int64_t>(f.neg_inf);
  j["subnormal"] = static_cast<std::int64_t>(f.subnormal);
  j["unwritten"] = static_cast<std::int64_t>(f.unwritten);
  j["foreign_poison"] = static_cast<std::int64_t>(f.foreign_poison);
  j["max_abs"] = json_number(static_cast<double>(f.max_abs()) * r.value_scale);
  j["first_nan"] = flag_index_json(r, f.first_nan);
  j["first_inf"] = flag_index_json(r, f.first_inf);
  j["first_unwritten"] = flag_index_json(r, f.first_unwritten);
  return j;
}

Json output_json(const OutputResult& r) {
  Json j;
  j["name"] = r.name;
  j["stage"] = r.stage_name;
  j["kind"] = stage_kind_name(r.kind);
  j["split"] = r.split;
  j["page"] = r.tile;
  j["quantity"] = quantity_name(r.quantity);
  j["dtype"] = dtype_name(r.dtype);
  j["captured"] = r.present;
  j["capture_problem"] = r.capture_problem;
  j["verdict"] = r.passed() ? "pass" : "fail";
  j["flags"] = flags_json(r);
  j["end_to_end"] = r.compared ? metrics_json(r.end_to_end) : Json(nullptr);
  j["local"] = r.compared ? metrics_json(r.local) : Json(nullptr);
  return j;
}

Json row_json(const std::optional<RowContext>& row) {
  if (!row) return nullptr;
  return Json{{"max", json_number(row->row_max)},
              {"sum", json_number(row->row_sum)},
              {"attended", row->attended},
              {"keys", row->keys},
              {"masked", row->masked()}};
}

Json divergence_json(const std::optional<Divergence>& d) {
  if (!d) return nullptr;
  Json j;
  j["stage"] = d->stage;
  j["output"] = d->output;
  j["kind"] = d->kind;
  j["split"] = d->split;
  j["page"] = d->page;
  j["index"] = index_json(d->index);
  j["cause"] = d->cause;
  j["evidence"] = d->evidence;
  j["stage_local"] = d->stage_local;
  j["kernel"] = optional_number(d->kernel);
  j["kernel_unwritten"] = d->kernel_unwritten;
  j["reference"] = optional_number(d->reference);
  j["bound"] = optional_number(d->bound);
  j["tight"] = optional_number(d->tight);
  j["row"] = row_json(d->row);
  return j;
}

Json case_description_json(const CaseDescription& d) {
  Json j;
  j["label"] = d.label;
  j["shape"] = Json{{"batch", d.shape.batch},
                    {"heads", d.shape.heads},
                    {"q_len", d.shape.q_len},
                    {"kv_len", d.shape.kv_len},
                    {"head_dim", d.shape.head_dim}};
  j["dtype"] = dtype_name(d.dtype);
  j["mask"] = d.mask;
  j["dist"] = d.dist;
  j["seed"] = d.seed ? Json(static_cast<std::int64_t>(*d.seed)) : Json(nullptr);
  j["scale"] = json_number(d.scale);
  j["source"] = d.source;
  return j;
}

Json descriptor_report_json(const DescriptorReport& d) {
  Json j;
  j["stage"] = static_cast<std::int64_t>(d.stage);
  j["launched"] = d.launched;
  j["record"] = record_json(d.record);
  j["findings"] = findings_json(d.findings);
  return j;
}

Json case_json(const CaseResult& c) {
  Json j;
  j["impl"] = c.impl;
  j["case"] = case_description_json(c.description);
  j["algorithm"] = c.algorithm;
  j["coverage"] = c.coverage.empty() ? std::string("every row") : c.coverage;
  if (!c.reference_device.empty()) j["reference_device"] = c.reference_device;
  if (c.window_rows > 0) j["window_rows"] = c.window_rows;
  j["verdict"] = verdict_name(c.verdict);
  j["reason"] = c.reason;
  j["seconds"] = json_number(c.seconds);
  j["seconds_by_phase"] = Json{{"traced_run", json_number(c.phases.traced_run)},
                               {"production_run", json_number(c.phases.production_run)},
                               {"evaluation", json_number(c.phases.evaluation)},
                               {"attribution", json_number(c.phases.attribution)},
                               {"repeatability", json_number(c.phases.repeatability)}};
  if (!c.evaluation_steps.empty()) {
    j["seconds_by_evaluation_step"] = Json::array();
    for (const auto& [step, seconds] : c.evaluation_steps) {
      j["seconds_by_evaluation_step"].push_back(Json{{"step", step}, {"seconds", json_number(seconds)}});
    }
  }
  j["stages"] = Json::array();
  for (const OutputResult& r : c.outputs) j["stages"].push_back(output_json(r));
  j["first_divergence"] = divergence_json(c.divergence);
  j["descriptors"] = Json::array();
  for (const DescriptorReport& d : c.descriptors) j["descriptors"].push_back(descriptor_report_json(d));
  return j;
}

Json input_finding_json(const InputFinding& f) {
  Json j;
  j["cause"] = f.cause;
  j["tensor"] = f.tensor;
  j["index"] = f.index ? index_json(*f.index) : Json(nullptr);
  j["detail"] = f.detail;
  j["defect"] = f.defect;
  return j;
}

}  // namespace

void write_json_report(std::ostream& out, const RunInfo& info, const std::vector<CaseResult>& cases) {
  std::map<std::string, std::int64_t> counts{{"pass", 0}, {"diverged", 0}, {"error", 0}, {"skipped", 0}};
  for (const CaseResult& c : cases) ++counts[verdict_name(c.verdict)];
  Json j;
  j["tool"] = "flashcore-check";
  j["version"] = info.version;
  j["json_schema"] = 4;
  j["command"] = info.command;
  j["device"] = info.device;
  j["resources"] = Json{{"peak_host_rss_bytes", info.peak_host_rss_bytes}, {"peak_device_bytes", info.peak_device_bytes}};
  if (!info.input_findings.empty()) {
    j["input_findings"] = Json::array();
    for (const InputFinding& f : info.input_findings) j["input_findings"].push_back(input_finding_json(f));
  }
  j["summary"] = Json::object();
  for (const auto& [k, v] : counts) j["summary"][k] = v;
  j["cases"] = Json::array();
  for (const CaseResult& c : cases) j["cases"].push_back(case_json(c));
  write_json_document(out, j);
}

}  // namespace fc

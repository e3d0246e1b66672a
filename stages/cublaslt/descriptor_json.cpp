#include "stages/cublaslt/descriptor_json.h"

#include <cstdint>
#include <utility>

#include "stages/cublaslt/descriptor_dump.h"
#include "stages/cublaslt/lt_names.h"

namespace fc {
namespace {

Json status_json(cublasStatus_t status) {
  return Json{{"code", static_cast<std::int64_t>(status)}, {"name", status_name(status)}};
}

template <class T>
Json integer_json(const ReadBack<T>& r) {
  return r.ok() ? Json(static_cast<std::int64_t>(r.value)) : Json(nullptr);
}

template <class T, class Name>
Json named_json(const ReadBack<T>& r, Name name) {
  return r.ok() ? Json(name(r.value)) : Json(nullptr);
}

Json layout_json(const LayoutRecord& l) {
  Json j;
  j["type"] = named_json(l.type, data_type_name);
  j["order"] = named_json(l.order, order_name);
  j["rows"] = integer_json(l.rows);
  j["cols"] = integer_json(l.cols);
  j["ld"] = integer_json(l.ld);
  j["batch_count"] = integer_json(l.batch_count);
  j["strided_batch_offset"] = integer_json(l.strided_batch_offset);
  return j;
}

Json desc_json(const MatmulDescRecord& m) {
  Json j;
  j["compute_type"] = named_json(m.compute_type, compute_type_name);
  j["scale_type"] = named_json(m.scale_type, data_type_name);
  j["transa"] = named_json(m.transa, operation_name);
  j["transb"] = named_json(m.transb, operation_name);
  j["epilogue"] = named_json(m.epilogue, epilogue_name);
  j["pointer_mode"] = named_json(m.pointer_mode, pointer_mode_name);
  return j;
}

Json algo_json(const AlgoRecord& g) {
  Json j;
  j["id"] = integer_json(g.id);
  j["tile_id"] = integer_json(g.tile_id);
  j["stages_id"] = integer_json(g.stages_id);
  j["splitk_num"] = integer_json(g.splitk_num);
  j["reduction_scheme"] = named_json(g.reduction_scheme, reduction_scheme_name);
  j["cta_swizzling"] = integer_json(g.cta_swizzling);
  j["custom_option"] = integer_json(g.custom_option);
  return j;
}

Json set_json(const SetEntry& e) {
  Json j;
  j["object"] = e.object;
  j["attribute"] = e.attribute;
  j["value"] = set_value_text(e);
  j["size"] = static_cast<std::int64_t>(e.size);
  j["expected_type"] = attribute_type_name(e.expected);
  j["expected_size"] = static_cast<std::int64_t>(attribute_type_size(e.expected));
  j["status"] = status_json(e.status);
  return j;
}

}  // namespace

Json record_json(const MatmulRecord& r) {
  Json j;
  j["name"] = r.name;
  j["desc"] = desc_json(r.desc);
  j["layouts"] = Json{{"a", layout_json(r.a)}, {"b", layout_json(r.b)}, {"c", layout_json(r.c)}, {"d", layout_json(r.d)}};
  j["preference"] = Json{{"max_workspace_bytes", integer_json(r.preference.max_workspace_bytes)}};
  j["algo"] = r.algo ? algo_json(*r.algo) : Json(nullptr);
  if (r.heuristic) {
    j["heuristic"] = Json{{"workspace_size", static_cast<std::int64_t>(r.heuristic->workspace_size)},
                          {"waves_count", json_number(r.heuristic->waves_count)},
                          {"state", status_json(r.heuristic->state)}};
  } else {
    j["heuristic"] = nullptr;
  }
  j["sets"] = Json::array();
  for (const SetEntry& e : r.sets) j["sets"].push_back(set_json(e));
  j["failed_gets"] = Json::array();
  for (const FailedRead& f : failed_reads(r)) {
    j["failed_gets"].push_back(Json{{"object", f.object}, {"attribute", f.attribute}, {"status", status_json(f.status)}});
  }
  return j;
}

Json findings_json(const std::vector<LintFinding>& findings) {
  Json j = Json::array();
  for (const LintFinding& f : findings) j.push_back(Json{{"rule", f.rule}, {"operand", f.operand}, {"message", f.message}});
  return j;
}

}  // namespace fc

#include "stages/cublaslt/descriptor_json.h"

#include <cstdint>
#include <utility>

#include "stages/cublaslt/descriptor_dump.h"
#include "stages/cublaslt/lt_names.h"

namespace fc {
namespace {

void write_status(JsonWriter& json, cublasStatus_t status) {
  json.begin_object().field("code", static_cast<std::int64_t>(status)).field("name", status_name(status)).end_object();
}

template <class T>
void integer_field(JsonWriter& json, const char* key, const ReadBack<T>& r) {
  json.key(key);
  if (r.ok()) {
    json.value(static_cast<std::int64_t>(r.value));
  } else {
    json.null();
  }
}

template <class T, class Name>
void named_field(JsonWriter& json, const char* key, const ReadBack<T>& r, Name name) {
  json.key(key);
  if (r.ok()) {
    json.value(name(r.value));
  } else {
    json.null();
  }
}

void write_layout(JsonWriter& json, const LayoutRecord& l) {
  json.begin_object();
  named_field(json, "type", l.type, data_type_name);
  named_field(json, "order", l.order, order_name);
  integer_field(json, "rows", l.rows);
  integer_field(json, "cols", l.cols);
  integer_field(json, "ld", l.ld);
  integer_field(json, "batch_count", l.batch_count);
  integer_field(json, "strided_batch_offset", l.strided_batch_offset);
  json.end_object();
}

void write_desc(JsonWriter& json, const MatmulDescRecord& m) {
  json.begin_object();
  named_field(json, "compute_type", m.compute_type, compute_type_name);
  named_field(json, "scale_type", m.scale_type, data_type_name);
  named_field(json, "transa", m.transa, operation_name);
  named_field(json, "transb", m.transb, operation_name);
  named_field(json, "epilogue", m.epilogue, epilogue_name);
  named_field(json, "pointer_mode", m.pointer_mode, pointer_mode_name);
  json.end_object();
}

void write_algo(JsonWriter& json, const AlgoRecord& g) {
  json.begin_object();
  integer_field(json, "id", g.id);
  integer_field(json, "tile_id", g.tile_id);
  integer_field(json, "stages_id", g.stages_id);
  integer_field(json, "splitk_num", g.splitk_num);
  named_field(json, "reduction_scheme", g.reduction_scheme, reduction_scheme_name);
  integer_field(json, "cta_swizzling", g.cta_swizzling);
  integer_field(json, "custom_option", g.custom_option);
  json.end_object();
}

void write_set(JsonWriter& json, const SetEntry& e) {
  json.begin_object()
      .field("object", e.object)
      .field("attribute", e.attribute)
      .field("value", set_value_text(e))
      .field("size", static_cast<std::int64_t>(e.size))
      .field("expected_type", attribute_type_name(e.expected))
      .field("expected_size", static_cast<std::int64_t>(attribute_type_size(e.expected)));
  json.key("status");
  write_status(json, e.status);
  json.end_object();
}

}  // namespace

void write_json(JsonWriter& json, const MatmulRecord& r) {
  json.begin_object().field("name", r.name);
  json.key("desc");
  write_desc(json, r.desc);
  json.key("layouts").begin_object();
  const std::pair<const char*, const LayoutRecord*> layouts[] = {{"a", &r.a}, {"b", &r.b}, {"c", &r.c}, {"d", &r.d}};
  for (const auto& [key, layout] : layouts) {
    json.key(key);
    write_layout(json, *layout);
  }
  json.end_object();
  json.key("preference").begin_object();
  integer_field(json, "max_workspace_bytes", r.preference.max_workspace_bytes);
  json.end_object();
  json.key("algo");
  if (r.algo) {
    write_algo(json, *r.algo);
  } else {
    json.null();
  }
  json.key("heuristic");
  if (r.heuristic) {
    json.begin_object()
        .field("workspace_size", static_cast<std::int64_t>(r.heuristic->workspace_size))
        .field("waves_count", static_cast<double>(r.heuristic->waves_count));
    json.key("state");
    write_status(json, r.heuristic->state);
    json.end_object();
  } else {
    json.null();
  }
  json.key("sets").begin_array();
  for (const SetEntry& e : r.sets) write_set(json, e);
  json.end_array();
  json.key("failed_gets").begin_array();
  for (const FailedRead& f : failed_reads(r)) {
    json.begin_object().field("object", f.object).field("attribute", f.attribute);
    json.key("status");
    write_status(json, f.status);
    json.end_object();
  }
  json.end_array();
  json.end_object();
}

void write_json(JsonWriter& json, const std::vector<LintFinding>& findings) {
  json.begin_array();
  for (const LintFinding& f : findings) {
    json.begin_object().field("rule", f.rule).field("operand", f.operand).field("message", f.message).end_object();
  }
  json.end_array();
}

}  // namespace fc

#include "stages/cublaslt/descriptor_dump.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "stages/cublaslt/lt_names.h"

namespace fc {
namespace {

template <class T, class Name>
std::string text(const ReadBack<T>& r, Name name) {
  if (!r.ok()) return "<get failed: " + status_name(r.status) + ">";
  return name(r.value);
}

template <class T>
std::string text(const ReadBack<T>& r) {
  return text(r, [](T v) { return std::to_string(v); });
}

template <class T>
T load(const std::vector<unsigned char>& bytes) {
  T v;
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

void dump_desc(std::ostream& out, const MatmulDescRecord& m) {
  out << "  desc: compute " << text(m.compute_type, compute_type_name)
      << " scale " << text(m.scale_type, data_type_name)
      << " transa " << text(m.transa, operation_name)
      << " transb " << text(m.transb, operation_name)
      << " epilogue " << text(m.epilogue, epilogue_name)
      << " pointer mode " << text(m.pointer_mode, pointer_mode_name) << '\n';
}

void dump_algo(std::ostream& out, const AlgoRecord& g) {
  out << "  algo: id " << text(g.id) << " tile " << text(g.tile_id) << " stages " << text(g.stages_id)
      << " split-k " << text(g.splitk_num) << " reduction " << text(g.reduction_scheme, reduction_scheme_name)
      << " cta swizzling " << text(g.cta_swizzling) << " custom option " << text(g.custom_option) << '\n';
}

}  // namespace

std::string layout_line(const LayoutRecord& l) {
  return l.operand + ": " + text(l.type, data_type_name) + " " + text(l.order, order_name) + " rows " +
         text(l.rows) + " cols " + text(l.cols) + " ld " + text(l.ld) + " batch " + text(l.batch_count) +
         " stride " + text(l.strided_batch_offset);
}

std::string set_value_text(const SetEntry& e) {
  if (e.bytes.empty()) return "(null)";
  const bool is_signed = attribute_type_is_signed(e.expected);
  switch (e.bytes.size()) {
    case 1: return is_signed ? std::to_string(load<std::int8_t>(e.bytes)) : std::to_string(load<std::uint8_t>(e.bytes));
    case 2: return is_signed ? std::to_string(load<std::int16_t>(e.bytes)) : std::to_string(load<std::uint16_t>(e.bytes));
    case 4: return is_signed ? std::to_string(load<std::int32_t>(e.bytes)) : std::to_string(load<std::uint32_t>(e.bytes));
    case 8: return is_signed ? std::to_string(load<std::int64_t>(e.bytes)) : std::to_string(load<std::uint64_t>(e.bytes));
    default: break;
  }
  std::string hex = "0x";
  for (unsigned char byte : e.bytes) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", byte);
    hex += buf;
  }
  return hex;
}

std::string set_line(const SetEntry& e) {
  std::ostringstream s;
  s << e.name() << " = " << set_value_text(e) << " (" << e.size << " bytes";
  if (e.size != attribute_type_size(e.expected)) s << "; " << attribute_type_name(e.expected) << " expected";
  s << ")";
  if (!e.ok()) s << " FAILED " << static_cast<int>(e.status) << ' ' << status_name(e.status);
  return s.str();
}

void dump(std::ostream& out, const MatmulRecord& r) {
  out << "matmul " << r.name << '\n';
  dump_desc(out, r.desc);
  for (const LayoutRecord* l : {&r.a, &r.b, &r.c, &r.d}) out << "  " << layout_line(*l) << '\n';
  out << "  preference: max workspace bytes " << text(r.preference.max_workspace_bytes) << '\n';
  if (r.algo) dump_algo(out, *r.algo);
  if (r.heuristic) {
    out << "  heuristic: workspace " << r.heuristic->workspace_size << " bytes, waves "
        << r.heuristic->waves_count << ", state " << status_name(r.heuristic->state) << '\n';
  }
  std::size_t failed = 0;
  for (const SetEntry& e : r.sets) failed += e.ok() ? 0 : 1;
  out << "  sets: " << r.sets.size() << ", failed " << failed << '\n';
  for (const SetEntry& e : r.sets) out << (e.ok() ? "    " : "  ! ") << set_line(e) << '\n';
  for (const FailedRead& f : failed_reads(r)) {
    out << "  ! get " << f.name() << " FAILED " << static_cast<int>(f.status) << ' ' << status_name(f.status) << '\n';
  }
}

}  // namespace fc

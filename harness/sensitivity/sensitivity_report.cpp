#include "harness/sensitivity/sensitivity_report.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <algorithm>
#include <sstream>

#include "core/json.h"
#include "harness/version.h"
#include "reports/table.h"

namespace fc {
namespace {

std::string delta_text(double d) {
  if (d <= 0) return "-";
  const int e = static_cast<int>(std::lround(std::log2(d)));
  if (std::ldexp(1.0, e) == d) return "2^" + std::to_string(e);
  std::ostringstream s;
  s << d;
  return s.str();
}

std::string cell_text(const SensitivityCell& c) {
  std::string s = std::to_string(c.detected) + "/" + std::to_string(c.trials);
  if (c.index_right != c.detected) s += " i=" + std::to_string(c.detected - c.index_right);
  return s;
}

bool always(const SensitivityCell& c) { return c.trials > 0 && c.detected == c.trials && c.index_right == c.trials; }

}  // namespace

void write_sensitivity_table(std::ostream& out, const SensitivityResult& result) {
  using Group = std::pair<std::string, DType>;
  std::vector<Group> groups;
  std::map<Group, std::vector<const SensitivityCell*>> cells;
  for (const SensitivityCell& c : result.cells) {
    const Group g{c.impl, c.dtype};
    if (cells.count(g) == 0) groups.push_back(g);
    cells[g].push_back(&c);
  }
  for (const Group& g : groups) {
    std::vector<std::int64_t> lens;
    std::vector<std::pair<std::string, std::string>> rows;  // (perturbation, stage kind) in first-seen order
    for (const SensitivityCell* c : cells[g]) {
      if (std::find(lens.begin(), lens.end(), c->kv_len) == lens.end()) lens.push_back(c->kv_len);
      const std::pair<std::string, std::string> row{c->perturbation, c->stage_kind};
      if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    }
    // Perturbations in their catalog order, stages in execution order.
    auto rank = [&](const std::pair<std::string, std::string>& row) {
      int p = 0, k = 0;
      while (p < static_cast<int>(perturbation_kinds().size()) && perturbation_id(perturbation_kinds()[p]) != row.first) ++p;
      for (const SensitivityCell* c : cells[g]) {
        if (c->perturbation == row.first && c->stage_kind == row.second) k = c->stage_order;
      }
      return std::make_pair(p, k);
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
    out << g.first << " " << dtype_name(g.second) << ": caught/trials at the stage planted (i=N: N caught at an "
        << "element the perturbation did not change)\n";
    out << "  " << std::left << std::setw(16) << "perturbation" << std::setw(11) << "stage";
    for (std::int64_t k : lens) out << std::setw(12) << ("Sk " + std::to_string(k));
    out << "\n";
    for (const auto& [perturbation, kind] : rows) {
      out << "  " << std::left << std::setw(16) << perturbation << std::setw(11) << kind;
      for (std::int64_t k : lens) {
        std::string text = "-";
        if (perturbation == "element-scale") {
          // The smallest delta caught in every trial, with every larger delta too.
          std::vector<const SensitivityCell*> scan;
          for (const SensitivityCell* c : cells[g]) {
            if (c->perturbation == perturbation && c->stage_kind == kind && c->kv_len == k) scan.push_back(c);
          }
          std::sort(scan.begin(), scan.end(), [](auto* a, auto* b) { return a->delta > b->delta; });
          double smallest = 0;
          for (const SensitivityCell* c : scan) {
            if (!always(*c)) break;
            smallest = c->delta;
          }
          if (!scan.empty()) text = smallest > 0 ? "d " + delta_text(smallest) : "d > " + delta_text(scan.front()->delta);
        } else {
          for (const SensitivityCell* c : cells[g]) {
            if (c->perturbation == perturbation && c->stage_kind == kind && c->kv_len == k) text = cell_text(*c);
          }
        }
        out << std::setw(12) << text;
      }
      out << "\n";
    }
    out << "\n";
  }
  for (const std::string& s : result.skipped) out << "skipped: " << s << "\n";
  out << "clean runs: " << result.clean_runs << ", false alarms: " << result.false_alarms.size() << "\n";
  for (const CaseResult& r : result.false_alarms) {
    out << "  false alarm: " << r.impl << " | " << r.description.label << ": " << outcome_text(r) << "\n";
    if (r.divergence) out << "    " << r.divergence->evidence << "\n";
  }
}

void write_sensitivity_json(std::ostream& out, const std::string& command, const SensitivityResult& result) {
  Json j;
  j["tool"] = "flashcore-check";
  j["version"] = std::string(tool_version());
  j["command"] = command;
  j["clean_runs"] = result.clean_runs;
  j["false_alarms"] = static_cast<std::int64_t>(result.false_alarms.size());
  j["cells"] = Json::array();
  for (const SensitivityCell& c : result.cells) {
    Json cell;
    cell["impl"] = c.impl;
    cell["dtype"] = dtype_name(c.dtype);
    cell["kv_len"] = c.kv_len;
    cell["perturbation"] = c.perturbation;
    cell["delta"] = json_number(c.delta);
    cell["stage_kind"] = c.stage_kind;
    cell["stage"] = c.stage;
    cell["trials"] = c.trials;
    cell["detected"] = c.detected;
    cell["index_right"] = c.index_right;
    cell["first_index"] = nullptr;
    if (c.first_index) {
      const Index4& i = *c.first_index;
      cell["first_index"] = Json{{"b", i.b}, {"h", i.h}, {"row", i.row}, {"col", i.col >= 0 ? Json(i.col) : Json(nullptr)}};
    }
    j["cells"].push_back(cell);
  }
  j["skipped"] = result.skipped;
  write_json_document(out, j);
}

}  // namespace fc

#include "reports/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <sstream>
#include <vector>

#include "reports/terminal.h"

namespace fc {
namespace {

std::string sci(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

struct Row {
  std::string stage;
  unsigned long long nan = 0, inf = 0, masked = 0, unwritten = 0;
  double abs_err = 0, norm = 0, tight_norm = 0, local_norm = 0;
  long long over = 0;
  std::string first_bad = "-", verdict;
};

// A run of consecutive passing tiles of the same output collapses into one row.
std::string group_of(const OutputResult& r) {
  return std::string(stage_kind_name(r.kind)) + "|" + std::to_string(r.split) + "|" +
         r.name.substr(r.stage_name.size());
}

std::string range_name(const OutputResult& first, const OutputResult& last) {
  if (first.tile < 0 || &first == &last) return first.name;
  std::string suffix = first.name.substr(first.stage_name.size());
  std::string split = first.split >= 0 ? std::to_string(first.split) + "." : "";
  return std::string(stage_kind_name(first.kind)) + "[" + split + std::to_string(first.tile) + ".." +
         std::to_string(last.tile) + "]" + suffix;
}

Row row_of(const std::vector<const OutputResult*>& group) {
  Row row;
  row.stage = range_name(*group.front(), *group.back());
  for (const OutputResult* r : group) {
    row.nan += r->flags.nan;
    // A masked score is -inf by convention: counted apart from the infinities a stage computed.
    const unsigned long long masked = r->compared ? static_cast<unsigned long long>(r->end_to_end.masked_neg_inf) : 0;
    row.inf += r->flags.pos_inf + r->flags.neg_inf - std::min(masked, r->flags.neg_inf);
    row.masked += masked;
    row.unwritten += r->flags.unwritten;
    if (r->compared) {
      row.abs_err = std::max(row.abs_err, r->end_to_end.max_abs_error);
      row.norm = std::max(row.norm, r->end_to_end.max_normalized_error);
      row.tight_norm = std::max(row.tight_norm, r->end_to_end.max_tight_error);
      row.local_norm = std::max(row.local_norm, r->local.max_tight_error);
      row.over += std::max(r->end_to_end.failures(), r->local.failures());
    }
  }
  const OutputResult& r = *group.front();
  if (group.size() == 1) row.first_bad = first_bad_text(r);
  row.verdict = group.size() == 1 && !r.passed() ? "FAIL" : "pass";
  return row;
}

}  // namespace

std::string index_string(const Index4& i) {
  std::ostringstream s;
  s << "(" << i.b << "," << i.h << "," << i.row << ",";
  if (i.col >= 0) s << i.col; else s << "-";
  s << ")";
  return s.str();
}

std::string first_bad_text(const OutputResult& r) {
  if (r.passed()) return "-";
  if (!r.present) return "not captured";
  if (!r.capture_problem.empty()) return "layout";
  if (r.compared && r.local.first_over()) return index_string(r.local.first_over()->index);
  if (r.compared && r.end_to_end.first_over()) return index_string(r.end_to_end.first_over()->index);
  if (r.flags.unwritten) return index_string(r.index_of(r.flags.first_unwritten));
  return "-";
}

void write_case_table(std::ostream& out, const CaseResult& result, bool colour) {
  out << result.impl << " | " << result.description.label << " | " << result.algorithm << "\n";
  if (!result.coverage.empty()) out << "  compared: " << result.coverage << "; flags cover every element\n";
  if (result.verdict == Verdict::error || result.verdict == Verdict::skipped) {
    out << "  " << painted_verdict(verdict_name(result.verdict), colour) << ": " << result.reason << "\n\n";
    return;
  }
  // Outputs of one kind are listed together, kinds in the order each first runs; within a
  // kind, in the order they run: consecutive passing tiles collapse into one row, a failing
  // tile has a row of its own.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const OutputResult*>> groups;
  for (const OutputResult& r : result.outputs) {
    const std::string g = group_of(r);
    if (groups.count(g) == 0) order.push_back(g);
    groups[g].push_back(&r);
  }
  std::vector<Row> rows;
  for (const std::string& g : order) {
    std::vector<const OutputResult*> passing;
    for (const OutputResult* r : groups[g]) {
      if (r->passed()) {
        passing.push_back(r);
        continue;
      }
      if (!passing.empty()) rows.push_back(row_of(passing));
      passing.clear();
      rows.push_back(row_of({r}));
    }
    if (!passing.empty()) rows.push_back(row_of(passing));
  }

  std::size_t width = 5;
  for (const Row& r : rows) width = std::max(width, r.stage.size());
  out << "  " << std::left << std::setw(static_cast<int>(width)) << "stage" << std::right << std::setw(7) << "NaN"
      << std::setw(9) << "Inf" << std::setw(9) << "masked" << std::setw(10) << "unwritten" << std::setw(12)
      << "max abs err" << std::setw(11) << "err/bound" << std::setw(11) << "err/tight" << std::setw(9) << "local"
      << std::setw(8) << "over" << "  " << std::left << std::setw(18) << "first bad" << "verdict\n";
  for (const Row& r : rows) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << r.stage << std::right << std::setw(7) << r.nan
        << std::setw(9) << r.inf << std::setw(9) << r.masked << std::setw(10) << r.unwritten << std::setw(12)
        << sci(r.abs_err) << std::setw(11) << sci(r.norm) << std::setw(11) << sci(r.tight_norm) << std::setw(9)
        << sci(r.local_norm) << std::setw(8) << r.over << "  " << std::left << std::setw(18) << r.first_bad
        << painted_verdict(r.verdict, colour) << "\n";
  }
  out << "  verdict: " << painted_verdict(verdict_name(result.verdict), colour);
  if (!result.reason.empty()) out << " (" << result.reason << ")";
  out << "\n";
  if (result.divergence) write_pinpoint(out, *result.divergence);
  write_evaluation_steps(out, result);
  out << "\n";
}

void write_evaluation_steps(std::ostream& out, const CaseResult& result) {
  if (result.evaluation_steps.empty()) return;
  char line[160];
  std::snprintf(line, sizeof line, "  evaluation, %.2f s, by step (thread-seconds, device work finished between steps):\n",
                result.phases.evaluation);
  out << line;
  for (const auto& [step, seconds] : result.evaluation_steps) {
    std::snprintf(line, sizeof line, "    %-40s %9.2f s\n", step.c_str(), seconds);
    out << line;
  }
}

void write_pinpoint(std::ostream& out, const Divergence& d) {
  out << "  first divergence: " << d.output << " (" << d.kind;
  if (d.split >= 0) out << ", split " << d.split;
  if (d.page >= 0) out << ", page " << d.page;
  out << ")";
  if (d.index.b >= 0) out << " at (b,h,row,col) " << index_string(d.index);
  out << "\n";
  out << "    cause:    " << d.cause << "\n";
  out << "    evidence: " << d.evidence << "\n";
  if (d.kernel) {
    out << "    kernel " << (d.kernel_unwritten ? "unwritten (its buffer's poison)" : sci(*d.kernel));
    if (d.reference) out << "  reference " << sci(*d.reference);
    if (d.bound) out << "  bound " << sci(*d.bound);
    if (d.tight) out << "  tight " << sci(*d.tight);
    out << "  ("
        << (d.stage_local ? "stage-local" : "end-to-end") << " comparison)\n";
  }
  if (d.row) {
    out << "    row: max " << sci(d.row->row_max) << ", sum " << sci(d.row->row_sum) << ", " << d.row->attended << " of "
        << d.row->keys << " keys attended" << (d.row->masked() ? " (fully masked)" : "") << "\n";
  }
}

std::string outcome_text(const CaseResult& r) {
  std::string s = verdict_name(r.verdict);
  if (r.divergence) {
    const Divergence& d = *r.divergence;  // a lint finding before launch names no element
    s += " at " + d.output + (d.index.b >= 0 ? " " + index_string(d.index) : std::string()) + " (" + d.cause + ")";
  }
  if (!r.reason.empty()) s += " (" + r.reason + ")";
  return s;
}

}  // namespace fc

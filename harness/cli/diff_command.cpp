// flashcore-check diff A.h5 B.h5: two snapshots of the same case (before and after a kernel
// change), stage by stage: which outputs changed, by how much, where. An output that only
// one snapshot has is a difference, listed first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/io/snapshot.h"
#include "harness/trace/judge.h"
#include "reports/table.h"
#include "reports/terminal.h"

namespace fc {
namespace {

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

std::string number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// Which of shape, dtype, scale, mask and inputs differ, each with both values.
std::vector<std::string> case_differences(const AttentionInputs& x, const AttentionInputs& y) {
  std::vector<std::string> found;
  if (!(x.problem.shape == y.problem.shape)) {
    found.push_back("shape " + x.problem.shape.to_string() + " vs " + y.problem.shape.to_string());
  }
  if (x.problem.dtype != y.problem.dtype) {
    found.push_back(std::string("dtype ") + dtype_name(x.problem.dtype) + " vs " + dtype_name(y.problem.dtype));
  }
  if (x.problem.scale != y.problem.scale) found.push_back("scale " + number(x.problem.scale) + " vs " + number(y.problem.scale));
  if (x.problem.mask.describe() != y.problem.mask.describe()) {
    found.push_back("mask " + x.problem.mask.describe() + " vs " + y.problem.mask.describe());
  }
  std::string inputs;
  for (const auto& [name, a, b] : {std::tuple<const char*, const HostTensor*, const HostTensor*>{"q", &x.q, &y.q},
                                   {"k", &x.k, &y.k},
                                   {"v", &x.v, &y.v}}) {
    if (!same_bytes(*a, *b)) inputs += std::string(inputs.empty() ? "" : ", ") + name;
  }
  if (!inputs.empty()) found.push_back("inputs " + inputs);
  return found;
}

void require_same_case(const Snapshot& a, const Snapshot& b, const std::string& path_b) {
  const std::vector<std::string> differences = case_differences(a.file.inputs, b.file.inputs);
  if (differences.empty()) return;
  std::string text;
  for (const std::string& d : differences) text += (text.empty() ? "" : "; ") + d;
  throw file_error(path_b, "not the same case as the first snapshot: " + text + " differ");
}

std::string ratio(const OutputResult& r) {
  if (!r.compared) return "-";
  std::ostringstream s;
  s << std::setprecision(3) << r.end_to_end.max_normalized_error;
  return s.str();
}

// The tensor of output i of a judged run: the trace build's captures, then the production
// build's results (harness/trace/evaluate.cpp lists them in that order).
const HostTensor& output_tensor(const TraceRun& run, std::size_t i) {
  return i < run.captured.size() ? run.captured[i].tensor : run.production.results.at(i - run.captured.size()).tensor;
}

std::map<std::string, std::size_t> by_name(const CaseResult& r) {
  std::map<std::string, std::size_t> names;
  for (std::size_t i = 0; i < r.outputs.size(); ++i) names[r.outputs[i].name] = i;
  return names;
}

}  // namespace

int run_diff(const DiffCommand& command) {
  Snapshot a = read_snapshot(H5Reader(command.a)), b = read_snapshot(H5Reader(command.b));
  require_same_case(a, b, command.b);
  const CaseResult ra =
      judged_from_file(command.a, [&] { return judge_run(a.impl, a.file.inputs, a.file.description, a.run); });
  const CaseResult rb =
      judged_from_file(command.b, [&] { return judge_run(b.impl, b.file.inputs, b.file.description, b.run); });
  const std::map<std::string, std::size_t> in_a = by_name(ra), in_b = by_name(rb);
  const bool colour = colour_stdout();
  std::ostream& out = detail_stream(command.quiet);
  // The stage column as wide as the longest output name ("normalize.lse (production)").
  std::size_t name_width = 20;
  for (const CaseResult* r : {&ra, &rb}) {
    for (const OutputResult& o : r->outputs) name_width = std::max(name_width, o.name.size());
  }
  const int stage_width = static_cast<int>(name_width + 2);

  out << "diff of " << a.impl << " (" << command.a << ") and " << b.impl << " (" << command.b << ") on "
      << a.file.description.label << "\n";
  out << "  " << std::left << std::setw(stage_width) << "stage" << std::right << std::setw(13) << "A err/bound" << std::setw(13)
      << "B err/bound" << std::setw(13) << "max |B-A|" << std::setw(11) << "differing" << "  first difference\n";
  // Outputs of one snapshot only: a stage one run has and the other has not is where they differ most.
  int one_sided = 0;
  for (const auto& [side, mine, theirs, result] :
       {std::tuple<const char*, const std::map<std::string, std::size_t>*, const std::map<std::string, std::size_t>*,
                   const CaseResult*>{"A", &in_a, &in_b, &ra},
        {"B", &in_b, &in_a, &rb}}) {
    for (const OutputResult& o : result->outputs) {
      if (theirs->count(o.name)) continue;
      ++one_sided;
      out << "  " << std::left << std::setw(stage_width) << o.name << std::right << std::setw(13)
          << (side[0] == 'A' ? ratio(o) : "-") << std::setw(13) << (side[0] == 'B' ? ratio(o) : "-") << "  "
          << painted(std::string("only in ") + side, Tone::bad, colour) << " ("
          << (side[0] == 'A' ? command.a : command.b) << ")\n";
    }
  }
  int changed = 0, compared = 0, unstored = 0;
  for (std::size_t i = 0; i < ra.outputs.size(); ++i) {
    const OutputResult& oa = ra.outputs[i];
    const auto it = in_b.find(oa.name);
    if (it == in_b.end()) continue;
    const HostTensor& ta = output_tensor(a.run, i);
    const HostTensor& tb = output_tensor(b.run, it->second);
    if (ta.empty() || tb.empty()) {
      ++unstored;
      out << "  " << std::left << std::setw(stage_width) << oa.name << "  (data not stored in both)\n";
      continue;
    }
    const OutputResult& ob = rb.outputs[it->second];
    if (ta.dims() != tb.dims()) {
      out << "  " << std::left << std::setw(stage_width) << oa.name << "  shapes differ: " << dims_string(ta.dims()) << " and "
          << dims_string(tb.dims()) << "\n";
      ++changed;
      ++compared;
      continue;
    }
    ++compared;
    double max_diff = 0;
    std::int64_t differing = 0, first = -1;
    for (std::int64_t e = 0; e < ta.numel(); ++e) {
      const double x = ta.get(e) * oa.value_scale, y = tb.get(e) * ob.value_scale;
      const bool same = x == y || (std::isnan(x) && std::isnan(y));
      if (same) continue;
      ++differing;
      if (first < 0) first = e;
      max_diff = std::max(max_diff, std::isfinite(x) && std::isfinite(y) ? std::fabs(y - x) : INFINITY);
    }
    changed += differing > 0;
    std::ostringstream diff;
    diff << std::setprecision(3) << max_diff;
    out << "  " << std::left << std::setw(stage_width) << oa.name << std::right << std::setw(13) << ratio(oa) << std::setw(13)
        << ratio(ob) << std::setw(13) << (differing ? diff.str() : "0") << std::setw(11) << differing << "  "
        << (first >= 0 ? index_string(oa.index_of(static_cast<unsigned long long>(first))) : "-") << "\n";
  }
  std::cout << "diff: verdicts " << painted_verdict(verdict_name(ra.verdict), colour) << " -> "
            << painted_verdict(verdict_name(rb.verdict), colour) << "; " << one_sided << " stage output"
            << (one_sided == 1 ? "" : "s") << " in one snapshot only, " << changed << " of " << compared
            << " in both changed";
  if (unstored) std::cout << " (" << unstored << " not stored in both)";
  std::cout << "\n";
  return one_sided > 0 || changed > 0 || ra.verdict != rb.verdict ? kExitDiverged : kExitPass;
}

}  // namespace fc

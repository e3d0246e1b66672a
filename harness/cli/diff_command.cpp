// flashcore-check diff A.h5 B.h5: two snapshots of the same case (before and after a kernel
// change), stage by stage: which outputs changed, by how much, where.
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>

#include "core/error.h"
#include "harness/cli/commands.h"
#include "harness/io/snapshot.h"
#include "harness/trace/judge.h"
#include "reports/table.h"

namespace fc {
namespace {

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

void require_same_case(const Snapshot& a, const Snapshot& b, const std::string& path_b) {
  const AttentionInputs& x = a.file.inputs;
  const AttentionInputs& y = b.file.inputs;
  const bool same = x.problem.shape == y.problem.shape && x.problem.dtype == y.problem.dtype &&
                    x.problem.scale == y.problem.scale && x.problem.mask.describe() == y.problem.mask.describe() &&
                    same_bytes(x.q, y.q) && same_bytes(x.k, y.k) && same_bytes(x.v, y.v);
  if (!same) throw file_error(path_b, "not the same case as the first snapshot (shape, dtype, scale, mask or inputs differ)");
}

std::string ratio(const OutputResult& r) {
  if (!r.compared) return "-";
  std::ostringstream s;
  s << std::setprecision(3) << r.end_to_end.max_normalized_error;
  return s.str();
}

}  // namespace

int run_diff(const DiffCommand& command) {
  const Snapshot a = read_snapshot(H5Reader(command.a)), b = read_snapshot(H5Reader(command.b));
  require_same_case(a, b, command.b);
  const CaseResult ra = judge_run(a.impl, a.file.inputs, a.file.description, a.run);
  const CaseResult rb = judge_run(b.impl, b.file.inputs, b.file.description, b.run);
  std::map<std::string, std::size_t> in_b;
  for (std::size_t i = 0; i < rb.outputs.size(); ++i) in_b[rb.outputs[i].name] = i;

  std::cout << "diff of " << a.impl << " (" << command.a << ") and " << b.impl << " (" << command.b << ") on "
            << a.file.description.label << "\n";
  std::cout << "  " << std::left << std::setw(22) << "stage" << std::right << std::setw(13) << "A err/bound"
            << std::setw(13) << "B err/bound" << std::setw(13) << "max |B-A|" << std::setw(11) << "differing"
            << "  first difference\n";
  int changed = 0, compared = 0;
  for (std::size_t i = 0; i < ra.outputs.size(); ++i) {
    const OutputResult& oa = ra.outputs[i];
    const auto it = in_b.find(oa.name);
    const HostTensor& ta = a.run.captured[i].tensor;
    if (it == in_b.end() || ta.empty() || b.run.captured[it->second].tensor.empty()) {
      std::cout << "  " << std::left << std::setw(22) << oa.name << "  (not stored in both)\n";
      continue;
    }
    const OutputResult& ob = rb.outputs[it->second];
    const HostTensor& tb = b.run.captured[it->second].tensor;
    if (ta.dims() != tb.dims()) {
      std::cout << "  " << std::left << std::setw(22) << oa.name << "  shapes differ: " << dims_string(ta.dims())
                << " and " << dims_string(tb.dims()) << "\n";
      ++changed;
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
    std::cout << "  " << std::left << std::setw(22) << oa.name << std::right << std::setw(13) << ratio(oa)
              << std::setw(13) << ratio(ob) << std::setw(13) << (differing ? diff.str() : "0") << std::setw(11)
              << differing << "  " << (first >= 0 ? index_string(oa.index_of(static_cast<unsigned long long>(first))) : "-")
              << "\n";
  }
  std::cout << "  verdicts: " << verdict_name(ra.verdict) << " -> " << verdict_name(rb.verdict) << "; " << changed
            << " of " << compared << " stage outputs changed\n";
  return changed > 0 || ra.verdict != rb.verdict ? kExitDiverged : kExitPass;
}

}  // namespace fc

// misplaced-values: the wrong values are the reference's at another place: another batch or
// head, rows or columns shifted, or the head transposed. The first bad elements' values are
// looked up in the whole end-to-end reference of the same output; each place that holds one
// gives a candidate shift (batch, head, row, column), tested on every bad element.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "harness/trace/hypotheses/diagnosis.h"
#include "reference/matrix.h"

namespace fc {
namespace {

constexpr std::int64_t kLookupBudget = std::int64_t{1} << 26;  // reference elements scanned

struct Shift {
  std::int64_t db = 0, dh = 0, dr = 0, dc = 0;
  bool transposed = false;
  bool operator<(const Shift& o) const {
    return std::tie(db, dh, dr, dc, transposed) < std::tie(o.db, o.dh, o.dr, o.dc, o.transposed);
  }
};

std::string describe(const Diagnosis& d, const Shift& s) {
  std::string where;
  auto add = [&where](const std::string& part) { where += (where.empty() ? "" : ", ") + part; };
  if (s.transposed) add("its transpose");
  if (s.db) add("batch " + std::to_string(d.b + s.db));
  if (s.dh) add("head " + std::to_string(d.h + s.dh));
  if (s.dr) add("rows shifted by " + std::to_string(s.dr));
  if (s.dc) add("columns shifted by " + std::to_string(s.dc));
  return where;
}

}  // namespace

Explanation test_misplaced_values(const Diagnosis& d) {
  const OutputResult& r = d.result;
  if (r.dims.size() != 4 || d.reference.size() == 0) return {};
  const Dims& dims = r.dims;
  const std::int64_t B = dims[0], H = dims[1], R = dims[2], C = dims[3];
  if (B * H * R * C > kLookupBudget) return {};
  if (!d.reference_tensor) return {};
  const HostTensor& ref = *d.reference_tensor;
  std::map<Shift, int> candidates;
  for (const BadElement* probe_element : d.probes()) {
    const BadElement& e = *probe_element;
    if (!std::isfinite(e.kernel) || e.kernel == 0) continue;
    for (std::int64_t flat = 0; flat < ref.numel(); ++flat) {
      const Index4 at = index_in(dims, flat);
      if (at.b == d.b && at.h == d.h && at.row == e.r && at.col == e.c) continue;
      BadElement probe = e;
      if (!d.explains(probe, ref.get(flat))) continue;
      candidates[{at.b - d.b, at.h - d.h, at.row - e.r, at.col - e.c, false}]++;
      if (at.b == d.b && at.h == d.h) candidates[{0, 0, at.col - e.r, at.row - e.c, true}]++;
      if (candidates.size() > 256) break;
    }
  }
  Explanation best;
  std::size_t best_n = 0;
  for (const auto& [s, hits] : candidates) {
    std::size_t n = 0;
    for (const BadElement& e : d.bad) {
      const std::int64_t b = d.b + s.db, h = d.h + s.dh;
      const std::int64_t row = s.transposed ? e.c + s.dr : e.r + s.dr, col = s.transposed ? e.r + s.dc : e.c + s.dc;
      if (b < 0 || b >= B || h < 0 || h >= H || row < 0 || row >= R || col < 0 || col >= C) continue;
      if (d.explains(e, ref.get(((b * H + h) * R + row) * C + col))) ++n;
    }
    if (n > best_n) {
      best_n = n;
      best = {"misplaced-values", static_cast<double>(n) / static_cast<double>(d.bad.size()),
              r.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) + " holds the reference of " +
                  describe(d, s) + ": " + explained_text(d, n)};
    }
  }
  return best;
}

}  // namespace fc

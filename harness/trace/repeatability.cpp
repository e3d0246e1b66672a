#include "harness/trace/repeatability.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/numeric.h"
#include "reference/compare.h"

namespace fc {
namespace {

const Captured* captured_named(const TraceRun& run, const std::string& output) {
  for (const Captured& c : run.captured) {
    if (c.present && !c.tensor.empty() && run.graph.stages.at(c.stage).output_name(c.output) == output) return &c;
  }
  return nullptr;
}

// Runs that differ only in the last bits are what a legitimately nondeterministic kernel
// (atomic float sums) gives; a race reads other values: a difference above 2^-10 of the
// value, or a NaN on one side only.
bool same_values(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b || std::fabs(a - b) <= 0x1p-10 * std::max(std::fabs(a), std::fabs(b));
}

struct Difference {
  std::int64_t count = 0, first = -1;
  double before = 0, after = 0;
};

std::optional<Difference> difference(const HostTensor& a, const HostTensor& b) {
  if (a.dims() != b.dims() || a.dtype() != b.dtype()) return std::nullopt;
  Difference diff;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (same_values(x, y)) continue;
    if (diff.count++ == 0) {
      diff.first = i;
      diff.before = x;
      diff.after = y;
    }
  }
  return diff;
}

}  // namespace

void test_repeatability(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                        const TraceRun& first, Divergence& d) {
  const Captured* before = captured_named(first, d.output);
  if (!before) return;
  for (int run = 2; run <= kRepeatabilityRuns + 1; ++run) {
    const TraceRun again = run_traced(impl, inputs, device, true, false, first.window);
    if (!again.error.empty()) return;
    const Captured* after = captured_named(again, d.output);
    if (!after) return;
    const std::optional<Difference> diff = difference(before->tensor, after->tensor);
    if (!diff || diff->count == 0) continue;
    const Index4 at = index_in(before->tensor.dims(), diff->first);
    d.cause = "race";
    d.evidence = d.output + " is not repeatable: run " + std::to_string(run) + " on the same inputs differs from run 1 in " +
                 std::to_string(diff->count) + " of " + std::to_string(before->tensor.numel()) + " elements, the first at " +
                 at_text(at) + " (" + number_text(diff->before) + ", then " + number_text(diff->after) +
                 "): a read that races its write (a missing barrier or wait)";
    return;
  }
}

}  // namespace fc

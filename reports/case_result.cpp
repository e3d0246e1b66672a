#include "reports/case_result.h"

namespace fc {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::diverged: return "diverged";
    case Verdict::error: return "error";
    case Verdict::skipped: return "skipped";
  }
  return "?";
}

bool OutputResult::passed() const {
  if (!present || !capture_problem.empty() || flags.unwritten > 0) return false;
  return !compared || (end_to_end.passed() && local.passed());
}

Index4 OutputResult::index_of(unsigned long long flat) const {
  Index4 at = index_in(dims, static_cast<std::int64_t>(flat));
  if (at.col >= 0) at.col += col_offset;
  return at;
}

bool same_divergence(const std::optional<Divergence>& a, const std::optional<Divergence>& b, bool with_index) {
  if (!a || !b) return !a && !b;
  return a->output == b->output && a->cause == b->cause && (!with_index || a->index == b->index);
}

}  // namespace fc

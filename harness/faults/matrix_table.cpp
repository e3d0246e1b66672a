#include "harness/faults/matrix_table.h"

#include <algorithm>

#include "reports/table.h"
#include "reports/terminal.h"

namespace fc {
namespace {

constexpr std::size_t kGap = 2;  // spaces between columns

std::string index_or_dash(const Index4& i) { return i.b >= 0 ? index_string(i) : "-"; }

// `text` padded to `width` + the gap; painted as a verdict when `colour` (the padding stays
// outside the colour codes).
std::string column(const std::string& text, std::size_t width, bool colour = false) {
  const std::string padding(std::max(width, text.size()) - text.size() + kGap, ' ');
  return (colour ? painted_verdict(text, true) : text) + padding;
}

}  // namespace

std::string expected_text(const Expectation& e) {
  return e.output + " " + (e.index ? index_string(*e.index) : std::string("-")) + " " + e.cause;
}

std::string found_text(const MatrixCell& c) {
  if (!c.faulty.divergence) return std::string("not found (") + verdict_name(c.faulty.verdict) + ")";
  const Divergence& d = *c.faulty.divergence;
  return d.output + " " + index_or_dash(d.index) + " " + d.cause;
}

void write_matrix_table(std::ostream& out, const std::vector<MatrixCell>& cells, bool colour) {
  std::size_t fault = 5, impl = 14, expected = 8, found = 5;  // the headers' widths
  for (const MatrixCell& c : cells) {
    fault = std::max(fault, c.fault.size());
    impl = std::max(impl, c.impl.size());
    expected = std::max(expected, expected_text(c.expected).size());
    found = std::max(found, found_text(c).size());
  }
  out << column("fault", fault) << column("implementation", impl) << column("expected", expected)
      << column("found", found) << column("clean", 5) << "result\n";
  for (const MatrixCell& c : cells) {
    out << column(c.fault, fault) << column(c.impl, impl) << column(expected_text(c.expected), expected)
        << column(found_text(c), found) << column(c.clean_ok() ? "pass" : "ALARM", 5, colour)
        << painted_verdict(c.ok() ? "ok" : "WRONG", colour) << "\n";
  }
}

}  // namespace fc

// Judging a trace build run in windows of query rows (harness/trace/windows.h): the rows of a
// sample each window holds, how the windows' results fold into the case's, and the row the
// window re-traced for attribution must hold (the element attribution names first).
#include <limits>

#include "catch.h"
#include "harness/trace/windows.h"

namespace fc {
namespace {

// An output of dims [1, 2, 100, 4] compared over `elements`, failing at `at` (over the tight
// bound, and over the worst case too when `worst`), or passing when `at` is null.
Metrics metrics(std::int64_t elements, const Index4* at, bool worst = true) {
  Metrics m;
  m.elements = elements;
  if (!at) return m;
  const ElementReport e{*at, 1.0, 0.0, 0.1, 0.1};
  m.over_tight = 1;
  m.first_failure = e;
  m.worst = e;
  m.max_tight_error = 10;
  if (worst) {
    m.over_bound = 1;
    m.first_worst_case_failure = e;
  }
  return m;
}

OutputResult output(const char* name) {
  OutputResult r;
  r.name = name;
  r.present = true;
  r.compared = true;
  r.dims = {1, 2, 100, 4};
  return r;
}

}  // namespace

TEST_CASE("a window holds the sample's rows that fall in it, or every row of it", "[windows]") {
  const Shape shape{1, 2, 100, 100, 64};
  RowSample every;
  const RowSample all = rows_in(every, shape, RowWindow{32, 16});
  REQUIRE(all.per_head.size() == 2);
  CHECK(all.per_head[1].front() == 32);
  CHECK(all.per_head[1].back() == 47);
  CHECK(all.judged == 32);
  CHECK_FALSE(all.all);
  RowSample some;
  some.all = false;
  some.per_head = {{0, 31, 32, 47, 48, 99}, {40}};
  const RowSample part = rows_in(some, shape, RowWindow{32, 16});
  CHECK(part.per_head[0] == std::vector<std::int64_t>{32, 47});
  CHECK(part.per_head[1] == std::vector<std::int64_t>{40});
  CHECK(part.judged == 3);
  CHECK(rows_in(some, shape, RowWindow{50, 40}).judged == 0);  // traced for its flags alone
}

TEST_CASE("windows fold in any order: the failure first in (b, h, row, col) order, flags added", "[windows]") {
  const Index4 late_head0{0, 0, 70, 1}, early_head1{0, 1, 3, 0};
  OutputResult first = output("qk[0]"), second = output("qk[0]");
  first.end_to_end = metrics(400, &early_head1);  // window of rows 0-49
  second.end_to_end = metrics(400, &late_head0);  // window of rows 50-99: head 0 comes first
  first.local = metrics(400, nullptr);
  second.local = metrics(400, nullptr);
  first.flags.nan = 1;
  first.flags.first_nan = 500;
  second.flags.nan = 2;
  second.flags.first_nan = 300;
  fold_window(first, second);
  CHECK(first.end_to_end.elements == 800);
  CHECK(first.end_to_end.failures() == 2);
  CHECK(first.end_to_end.first_failure->index == late_head0);
  CHECK(first.flags.nan == 3);
  CHECK(first.flags.first_nan == 300);

  // A production result's flags are its one whole run's, the same in every window.
  OutputResult produced = output("normalize (production)"), again = produced;
  produced.production = again.production = true;
  produced.flags.unwritten = again.flags.unwritten = 5;
  fold_window(produced, again);
  CHECK(produced.flags.unwritten == 5);
  // Missing from one window is missing.
  OutputResult absent = output("softmax[0].max");
  absent.present = false;
  OutputResult kept = output("softmax[0].max");
  fold_window(kept, absent);
  CHECK_FALSE(kept.present);
}

TEST_CASE("the window traced again holds the element attribution names first", "[windows]") {
  const Index4 local_at{0, 0, 90, 0}, e2e_at{0, 0, 10, 0};
  OutputResult r = output("pv[3]");
  r.local = metrics(400, &local_at);
  r.end_to_end = metrics(400, &e2e_at);
  // Stage-local before end to end, as attribution goes.
  CHECK(first_failing_row({r}) == 90);
  // A masked score's -inf is no failure: its flag does not pick the window.
  OutputResult masked = output("qk[0]");
  masked.local = masked.end_to_end = metrics(400, nullptr);
  masked.flags.neg_inf = 7;
  masked.flags.first_inf = 0;
  CHECK(first_failing_row({masked, r}) == 90);
  // Judged by the worst case, an element over the tight bound alone does not count.
  OutputResult worst = output("softmax[1]");
  const Index4 tight_only{0, 0, 5, 0}, over_both{0, 1, 60, 2};
  worst.local = metrics(400, nullptr);
  worst.end_to_end = metrics(400, &tight_only, false);
  Metrics both = metrics(400, &over_both);
  worst.end_to_end.over_bound = 1;
  worst.end_to_end.first_worst_case_failure = both.first_worst_case_failure;
  worst.end_to_end.judged_by = worst.local.judged_by = BoundChoice::worst;
  CHECK(first_failing_row({worst}) == 60);
  // Never written: the first unwritten element.
  OutputResult unwritten = output("normalize");
  unwritten.compared = false;
  unwritten.flags.unwritten = 3;
  unwritten.flags.first_unwritten = (1 * 100 + 42) * 4 + 1;  // h 1, row 42
  CHECK(first_failing_row({unwritten}) == 42);
  // Failed without an element (not as declared): any window shows it.
  OutputResult mismatch = output("qk[1]");
  mismatch.capture_problem = "captured f16, declared f32";
  CHECK_FALSE(first_failing_row({mismatch}).has_value());
  // Named from the windows when the re-traced window does not show it.
  const Divergence d = unreproduced({masked, r});
  CHECK(d.output == "pv[3]");
  CHECK(d.cause == "unknown");
  CHECK(d.index == local_at);
}

}  // namespace fc

namespace fc {

TEST_CASE("the window traced again for attribution starts at the failing row's tile and stays small", "[windows]") {
  // The failing row's tile onward, at most the rows asked for, in whole tiles.
  RowWindow w = attribution_window(5000, 1100, 128, 65536);
  CHECK(w.first == 4992);
  CHECK(w.rows == 1024);
  CHECK(w.holds(5000));
  w = attribution_window(300, 256, 128, 65536);
  CHECK(w.first == 256);
  CHECK(w.rows == 256);
  // None past the last row.
  w = attribution_window(65536, 1024, 128, 65537);
  CHECK(w.first == 65536);
  CHECK(w.rows == 1);
  // A tile larger than the cap: one tile.
  w = attribution_window(3000, 1024, 1536, 65536);
  CHECK(w.first == 1536);
  CHECK(w.rows == 1536);
  CHECK(w.holds(3000));
  // Every row it could be asked for is held.
  for (std::int64_t row = 0; row < 2000; row += 37) CHECK(attribution_window(row, 640, 64, 2000).holds(row));
}

}  // namespace fc

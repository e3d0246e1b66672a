// --rows: a judgement of some query rows is exact for those rows (every key, every stage),
// and a sample always holds the rows where index arithmetic goes wrong first.
#include <algorithm>

#include "catch.h"
#include "core/error.h"
#include "harness/inputs.h"
#include "harness/trace/judge.h"
#include "harness/trace/row_sample.h"
#include "kernels/implementation.h"

namespace fc {
namespace {

bool holds(const std::vector<std::int64_t>& rows, std::int64_t r) { return std::binary_search(rows.begin(), rows.end(), r); }

Problem problem_of(Shape shape) {
  Problem p;
  p.shape = shape;
  return p;
}

CaseSpec window_case() {
  CaseSpec s;
  s.shape = {1, 2, 64, 64, 64};
  s.mask = "window=8,0";
  s.seed = 3;
  return s;
}

CaseResult judge_rows(const char* fault, const std::string& rows) {
  std::unique_ptr<Implementation> impl = make_implementation("cpu-emulated");
  impl->inject(fault);
  const CaseSpec spec = window_case();
  const AttentionInputs in = generate_inputs(spec);
  JudgeOptions options;
  options.rows = parse_rows(rows);
  return judge_case(*impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), nullptr, options);
}

const OutputResult& first_compared(const CaseResult& r) {
  const auto it = std::find_if(r.outputs.begin(), r.outputs.end(), [](const OutputResult& o) { return o.compared; });
  REQUIRE(it != r.outputs.end());
  return *it;
}

}  // namespace

TEST_CASE("row sampling reads --rows as all, a count or a list, and names bad text", "[trace][rows]") {
  CHECK(parse_rows("all").kind == RowSpec::Kind::all);
  CHECK(parse_rows("16").kind == RowSpec::Kind::sample);
  CHECK(parse_rows("16").count == 16);
  const RowSpec list = parse_rows("4095,0,17");
  CHECK(list.kind == RowSpec::Kind::list);
  CHECK(list.rows == std::vector<std::int64_t>{4095, 0, 17});
  for (const char* bad : {"", "0", "-3", "1,,2", "x", "3,y", "12abc"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_rows(bad), Error);
  }
}

TEST_CASE("a row sample holds the first and last rows, tile boundaries and the rows where a flat offset wraps",
          "[trace][rows]") {
  StageGraph graph;
  graph.query_tile = 64;
  graph.algorithm.tile_width = 128;
  // Scores [1,2,600,512]: flat row 65536 / 512 = 128 wraps 16-bit offsets; output [.,64]: row 1024 = head 1 row 424.
  const Problem p = problem_of({1, 2, 600, 512, 64});
  const RowSample s = sample_rows(p, graph, parse_rows("16"));
  REQUIRE_FALSE(s.all);
  REQUIRE(s.per_head.size() == 2);
  for (const auto& head : s.per_head) {
    CHECK(std::is_sorted(head.begin(), head.end()));
    CHECK(holds(head, 0));
    CHECK(holds(head, 599));
    CHECK(holds(head, 63));
    CHECK(holds(head, 64));
    CHECK(holds(head, 576));  // the last query-tile boundary
  }
  CHECK(holds(s.per_head[0], 127));
  CHECK(holds(s.per_head[0], 128));
  CHECK(holds(s.per_head[1], 1024 - 600 - 1));
  CHECK(holds(s.per_head[1], 1024 - 600));
  CHECK(s.total == 1200);
  CHECK(s.judged < s.total);
  CHECK(s.coverage.find("of 1200 rows judged") != std::string::npos);

  CHECK(sample_rows(p, graph, parse_rows("600")).all);
  CHECK(sample_rows(p, graph, parse_rows("all")).all);
  CHECK_THROWS_AS(sample_rows(p, graph, parse_rows("3,600")), Error);
  const RowSample listed = sample_rows(p, graph, parse_rows("5,3,5"));
  CHECK(listed.per_head[1] == std::vector<std::int64_t>{3, 5});
  CHECK(listed.judged == 4);
}

TEST_CASE("a sampled judgement compares only its rows, every key of them, and still finds a bug there",
          "[trace][rows]") {
  // window-off-by-one masks the oldest key of every window: rows 8 and later, never rows 0..7.
  const CaseResult all = judge_rows("window-off-by-one", "all");
  REQUIRE(all.verdict == Verdict::diverged);
  CHECK(all.coverage.empty());

  const CaseResult sampled = judge_rows("window-off-by-one", "4");
  REQUIRE(sampled.verdict == Verdict::diverged);
  CHECK(sampled.divergence->stage == all.divergence->stage);
  CHECK(sampled.divergence->cause == all.divergence->cause);
  CHECK(sampled.divergence->index.row >= 8);
  CHECK(sampled.coverage.find("rows judged") != std::string::npos);
  const OutputResult& scores = first_compared(sampled);
  CHECK(scores.local.elements == 2 * 4 * 64);
  CHECK(first_compared(all).local.elements == 2 * 64 * 64);

  // Rows the bug never touches: the same faulty kernel passes when only they are judged.
  const CaseResult untouched = judge_rows("window-off-by-one", "0,3,7");
  CHECK(untouched.verdict == Verdict::pass);
  CHECK(first_compared(untouched).local.elements == 2 * 3 * 64);
  CHECK(judge_rows("", "4").verdict == Verdict::pass);
}

}  // namespace fc

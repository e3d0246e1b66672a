// --rows: a judgement of some query rows is exact for those rows (every key, every stage),
// and a sample always holds the rows where index arithmetic goes wrong first.
#include <algorithm>
#include <cmath>

#include "catch.h"
#include "core/error.h"
#include "harness/inputs.h"
#include "harness/trace/evaluate.h"
#include "harness/trace/judge.h"
#include "harness/trace/session.h"
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

bool same(const HostTensor& a, const HostTensor& b) {
  if (a.numel() != b.numel()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (x != y && !(std::isnan(x) && std::isnan(y))) {
      WARN("element " << i << ": " << x << " vs " << y);
      return false;
    }
  }
  return true;
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

TEST_CASE("a head judged in blocks of rows gives what it gives judged whole, element for element", "[trace][rows]") {
  struct Run {
    const char* impl;
    const char* fault;
    const char* mask;
  };
  for (const Run& one : {Run{"cpu-emulated", "window-off-by-one", "window=8,0"}, Run{"cpu-emulated-paged", "", "varlen+causal-br"},
                         Run{"cpu-emulated-paged", "first-page-rescale", "none"}}) {
    INFO(one.impl << " " << one.fault << " " << one.mask);
    std::unique_ptr<Implementation> impl = make_implementation(one.impl);
    impl->inject(one.fault);
    CaseSpec spec;
    spec.shape = {2, 2, 70, 150, 32};
    spec.mask = one.mask;
    spec.seed = 4;
    const AttentionInputs in = generate_inputs(spec);
    const TraceRun run = run_traced(*impl, in, nullptr, true);
    std::vector<OutputReferences> whole_refs, block_refs;
    const auto whole = evaluate_outputs(in, run, &whole_refs, BoundChoice::tight, nullptr, std::int64_t{1} << 40);
    const auto blocks = evaluate_outputs(in, run, &block_refs, BoundChoice::tight, nullptr, 150 * 16);  // 16 rows a block
    REQUIRE(whole.size() == blocks.size());
    // Judged with a cache for the next call (as windows are), every K/V head's are kept after it,
    // and the same metrics come out; one that keeps them while needed holds none after the call.
    HeadKvCache needed(in, HeadKvCache::Keep::while_needed);
    evaluate_outputs(in, run, nullptr, BoundChoice::tight, nullptr, 150 * 16, std::nullopt, host_evaluators(), &needed);
    CHECK(needed.kept_bytes() == 0);
    HeadKvCache cache(in, HeadKvCache::Keep::for_next_call);
    const auto cached = evaluate_outputs(in, run, nullptr, BoundChoice::tight, nullptr, 150 * 16, std::nullopt,
                                         host_evaluators(), &cache);
    CHECK(cache.kept_bytes() == static_cast<std::size_t>(2 * 2 * 150 * 32 * 2) * sizeof(double));
    REQUIRE(cached.size() == blocks.size());
    for (std::size_t i = 0; i < cached.size(); ++i) {
      CHECK(cached[i].end_to_end.max_normalized_error == blocks[i].end_to_end.max_normalized_error);
      CHECK(cached[i].local.over_tight == blocks[i].local.over_tight);
    }
    const AttentionInputs same_values = generate_inputs(spec);  // equal, but other inputs
    HeadKvCache other(same_values);
    CHECK_THROWS_AS(evaluate_outputs(in, run, nullptr, BoundChoice::tight, nullptr, 150 * 16, std::nullopt,
                                     host_evaluators(), &other),
                    Error);
    bool any_failure = false;
    std::size_t references_compared = 0;
    for (std::size_t i = 0; i < whole.size(); ++i) {
      INFO(whole[i].name);
      for (const auto& [w, k] : {std::pair(&whole[i].end_to_end, &blocks[i].end_to_end), std::pair(&whole[i].local, &blocks[i].local)}) {
        CHECK(w->elements == k->elements);
        CHECK(w->over_tight == k->over_tight);
        CHECK(w->over_bound == k->over_bound);
        CHECK(w->max_tight_error == k->max_tight_error);
        CHECK(w->max_normalized_error == k->max_normalized_error);
        CHECK(w->max_abs_error == k->max_abs_error);
        CHECK(w->nan_kernel == k->nan_kernel);
        REQUIRE(w->first_failure.has_value() == k->first_failure.has_value());
        if (w->first_failure) {
          any_failure = true;
          CHECK(w->first_failure->index == k->first_failure->index);
        }
      }
      // (varlen: the whole head also writes the reference of rows past a sequence, never compared)
      if (i < whole_refs.size() && !whole_refs[i].end_to_end.empty() && !in.problem.layout.varlen()) {
        CHECK(same(whole_refs[i].end_to_end, block_refs[i].end_to_end));
        CHECK(same(whole_refs[i].local_tight, block_refs[i].local_tight));
        CHECK(same(whole_refs[i].end_to_end_tight, block_refs[i].end_to_end_tight));
        CHECK(same(whole_refs[i].local_bound, block_refs[i].local_bound));
        CHECK(same(whole_refs[i].local, block_refs[i].local));
        ++references_compared;
      }
    }
    CHECK(any_failure == (std::string(one.fault) != ""));
    if (!in.problem.layout.varlen()) CHECK(references_compared > 0);
  }
}

}  // namespace fc

// A stage output captured in blocks of rows (stages/tap.h, capture_rows) is the output
// captured whole: the same host copy, the same flags with first indices in the whole
// tensor's logical order; a block that does not fit, or rows never captured, is a problem
// with the capture, said in words.
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "catch.h"
#include "harness/inputs.h"
#include "harness/trace/capture.h"
#include "stages/workspace.h"

namespace fc {
namespace {

struct OneStage {
  Problem problem;
  StageGraph graph;
};

OneStage one_output_stage(const Shape& shape) {
  CaseSpec spec;
  spec.shape = shape;
  OneStage s{generate_inputs(spec).problem, {}};
  s.graph.algorithm.kind = Algorithm::Kind::full;
  s.graph.arithmetic = nominal_arithmetic(s.problem.dtype);
  s.graph.stages = {{StageKind::pv, -1, -1, {{"", Quantity::output, DType::f32}}}};
  return s;
}

}  // namespace

TEST_CASE("an output captured in blocks of rows equals the output captured whole", "[trace][capture]") {
  const OneStage s = one_output_stage({2, 3, 5, 7, 4});  // 30 rows of 4
  Workspace ws(false);
  Buffer& out = ws.allocate("output", DType::f32, 30 * 4);
  ws.poison(nullptr);
  for (int i = 0; i < 30 * 4; ++i) out.as<float>()[i] = 0.25f * static_cast<float>(i % 13) - 1.0f;
  for (int i = 44; i < 48; ++i) out.as<float>()[i] = std::nanf("");        // row 11
  out.as<float>()[97] = INFINITY;                                          // row 24
  const std::uint32_t own = poison_bits(DType::f32, out.id);
  std::memcpy(out.as<float>() + 118, &own, 4);  // row 29 never written
  const int other = out.id % kMaxPoisonId + 1;
  const std::uint32_t foreign = poison_bits(DType::f32, other);
  std::memcpy(out.as<float>() + 81, &foreign, 4);  // row 20 copied from a buffer nobody wrote

  CaptureTap whole(s.graph, s.problem, true, nullptr);
  whole.capture(0, 0, out.view({2, 3, 5, 4}));
  whole.finish();
  CaptureTap blocks(s.graph, s.problem, true, nullptr);
  for (std::int64_t first : {0, 9, 23}) {  // rows 0-8, 9-22, 23-29
    const std::int64_t rows = (first == 0 ? 9 : first == 9 ? 14 : 7);
    blocks.capture_rows(0, 0, out.view_at(first * 4, {rows, 4}), first);
  }
  blocks.finish();
  const Captured &a = whole.results()[0], &b = blocks.results()[0];
  REQUIRE(b.problem.empty());
  CHECK(b.present);
  CHECK(b.view.dims == a.view.dims);
  CHECK(std::memcmp(a.tensor.data(), b.tensor.data(), a.tensor.nbytes()) == 0);
  CHECK(b.flags.nan == a.flags.nan);
  CHECK(b.flags.nan == 5);  // row 11's four and the foreign poison
  CHECK(b.flags.first_nan == a.flags.first_nan);
  CHECK(b.flags.first_nan == 44);
  CHECK(b.flags.pos_inf == 1);
  CHECK(b.flags.first_inf == 97);
  CHECK(b.flags.unwritten == 1);
  CHECK(b.flags.first_unwritten == 118);
  CHECK(b.flags.max_abs_bits == a.flags.max_abs_bits);
  CHECK(b.flags.foreign_poison == 1);
  CHECK(b.flags.first_foreign == a.flags.first_foreign);
  CHECK(b.flags.first_foreign_offset() == 81);
  CHECK(b.flags.foreign_source() == other);
}

TEST_CASE("rows never captured, or a block that does not fit its output, are said", "[trace][capture]") {
  const OneStage s = one_output_stage({1, 2, 6, 7, 4});  // 12 rows of 4
  Workspace ws(false);
  Buffer& out = ws.allocate("output", DType::f32, 12 * 4);
  for (int i = 0; i < 12 * 4; ++i) out.as<float>()[i] = 1.0f;

  // The capture's problem after these blocks (first row, rows), in order.
  auto problem_after = [&](const std::vector<std::pair<std::int64_t, TensorView>>& blocks) {
    CaptureTap tap(s.graph, s.problem, true, nullptr);
    for (const auto& [first, block] : blocks) tap.capture_rows(0, 0, block, first);
    tap.finish();
    return tap.results()[0].problem;
  };
  CHECK(problem_after({{0, out.view_at(0, {6, 4})}}) == "captured 6 rows in blocks of 12");
  CHECK(problem_after({{8, out.view_at(0, {6, 4})}}).find("captured rows 8..") == 0);
  // 12 rows counted, 3..5 twice, 9..11 never.
  CHECK(problem_after({{0, out.view_at(0, {6, 4})}, {3, out.view_at(12, {6, 4})}}) == "captured rows 3..5 twice");
  const std::string wrong_width = problem_after({{0, out.view_at(0, {8, 3})}});
  INFO(wrong_width);
  CHECK(wrong_width.find("as fp32 [8,3], declared fp32 [1,2,6,4]") != std::string::npos);
}

TEST_CASE("blocks of rows may come in any order, and a reset tap takes a run's blocks afresh", "[trace][capture]") {
  const OneStage s = one_output_stage({1, 2, 6, 7, 4});  // 12 rows of 4
  Workspace ws(false);
  Buffer& out = ws.allocate("output", DType::f32, 12 * 4);
  for (int i = 0; i < 12 * 4; ++i) out.as<float>()[i] = static_cast<float>(i);
  out.as<float>()[30] = std::nanf("");  // row 7
  CaptureTap tap(s.graph, s.problem, true, nullptr);
  for (int run = 0; run < 2; ++run) {
    tap.reset();
    tap.capture_rows(0, 0, out.view_at(8 * 4, {4, 4}), 8);
    tap.capture_rows(0, 0, out.view_at(0, {3, 4}), 0);
    tap.capture_rows(0, 0, out.view_at(3 * 4, {5, 4}), 3);
    tap.finish();
    const Captured& c = tap.results()[0];
    INFO("run " << run << ": " << c.problem);
    REQUIRE(c.problem.empty());
    CHECK(c.flags.nan == 1);
    CHECK(c.flags.first_nan == 30);
    CHECK(c.view.data == nullptr);  // no one buffer holds the whole output
    for (int i = 0; i < 12 * 4; ++i) {
      if (i != 30) CHECK(c.tensor.get(i) == static_cast<double>(i));
    }
  }
}

}  // namespace fc

namespace fc {

// A trace run in a window of query rows (stages/stage.h, RowWindow) captures those rows of
// every head: its flags name elements of the whole output, and its head reads back in place.
TEST_CASE("a capture of a window of rows holds them alone and names elements of the whole output", "[trace][capture]") {
  const OneStage s = one_output_stage({2, 3, 5, 7, 4});
  const RowWindow window{2, 2};  // rows 2 and 3 of each head's 5
  Workspace ws(false);
  Buffer& out = ws.allocate("output", DType::f32, 2 * 3 * 2 * 4);
  for (int i = 0; i < 2 * 3 * 2 * 4; ++i) out.as<float>()[i] = static_cast<float>(i);
  out.as<float>()[(1 * 2 + 1) * 4 + 2] = std::nanf("");  // b 0, h 1, window row 1 (row 3), col 2
  CaptureTap tap(s.graph, s.problem, true, nullptr);
  tap.set_window(window);
  CHECK(windowed_dims({2, 3, 5, 4}, window) == Dims{2, 3, 2, 4});
  tap.capture(0, 0, out.view({2, 3, 2, 4}));
  tap.finish();
  const Captured& c = tap.results()[0];
  REQUIRE(c.problem.empty());
  CHECK(c.flags.nan == 1);
  CHECK(c.flags.first_nan == static_cast<unsigned long long>((1 * 5 + 3) * 4 + 2));
  CHECK(held_row(c, 3) == 1);
  CHECK(held_row(c, 4) == -1);
  const MatrixR head = captured_head(c, 1, 2, 5);  // b 1, h 2
  REQUIRE(head.rows() == 5);
  CHECK(std::isnan(head(0, 0)));
  CHECK(head(2, 0) == static_cast<double>(((1 * 3 + 2) * 2 + 0) * 4));
  CHECK(head(3, 3) == static_cast<double>(((1 * 3 + 2) * 2 + 1) * 4 + 3));
  // A capture of the whole output where a window was declared is a problem with the capture.
  CaptureTap wrong(s.graph, s.problem, true, nullptr);
  wrong.set_window(window);
  Buffer& whole = ws.allocate("whole", DType::f32, 2 * 3 * 5 * 4);
  wrong.capture(0, 0, whole.view({2, 3, 5, 4}));
  CHECK_FALSE(wrong.results()[0].problem.empty());
}

}  // namespace fc

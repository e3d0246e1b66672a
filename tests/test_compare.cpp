// Comparison semantics: what passes, what fails, and where a failure is reported.
#include <cmath>
#include <limits>

#include "catch.h"
#include "reference/compare.h"

namespace fc {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A reference whose worst-case bound is `bound` and whose tight bound is `tight` (the same
// unless given).
Bounded reference_of(const MatrixR& value, double bound, double tight = -1) {
  Bounded b = Bounded::exact(value);
  b.bound = MatrixR::Constant(value.rows(), value.cols(), bound);
  b.tight = MatrixR::Constant(value.rows(), value.cols(), tight < 0 ? bound : tight);
  return b;
}
}  // namespace

TEST_CASE("elements within the bound pass and the metrics say by how much", "[compare]") {
  MatrixR ref(2, 2), ker(2, 2);
  ref << 1, 2, 3, 4;
  ker << 1.05, 2, 3, 3.9;
  const Metrics m = compare_head({0, 0, 0, false}, ker, reference_of(ref, 0.2), DType::f32);
  CHECK(m.passed());
  CHECK(m.elements == 4);
  CHECK(m.max_abs_error == Approx(0.1));
  CHECK(m.max_rel_error == Approx(0.05));
  CHECK(m.max_normalized_error == Approx(0.5));
  CHECK(m.worst->index == Index4{0, 0, 1, 1});
  CHECK(!m.first_failure);
}

TEST_CASE("an element over its bound fails at its own index, first and worst told apart", "[compare]") {
  MatrixR ref = MatrixR::Zero(3, 4), ker = MatrixR::Zero(3, 4);
  ker(1, 2) = 0.3;  // 3x the bound
  ker(2, 0) = 0.5;  // 5x the bound, later in order
  const Metrics m = compare_head({1, 2, 64, false}, ker, reference_of(ref, 0.1), DType::f32);
  CHECK(!m.passed());
  CHECK(m.over_bound == 2);
  CHECK(m.first_failure->index == Index4{1, 2, 1, 66});  // column offset of a tile
  CHECK(m.worst->index == Index4{1, 2, 2, 64});
  CHECK(m.max_normalized_error == Approx(5));
  CHECK(m.max_tight_error == Approx(5));
}

TEST_CASE("the tight bound decides by default; over the worst-case bound always fails", "[compare]") {
  MatrixR ref = MatrixR::Zero(1, 4), ker = MatrixR::Zero(1, 4);
  ker(0, 1) = 0.05;  // over the tight bound (0.01) only
  ker(0, 3) = 0.5;   // over both
  const Bounded r = reference_of(ref, 0.1, 0.01);
  const Metrics tight = compare_head({0, 0, 0, false}, ker, r, DType::f32);
  CHECK(!tight.passed());
  CHECK(tight.over_tight == 2);
  CHECK(tight.over_bound == 1);
  CHECK(tight.first_failure->index.col == 1);
  CHECK(tight.first_worst_case_failure->index.col == 3);
  CHECK(tight.first_over()->index.col == 1);
  CHECK(tight.max_tight_error == Approx(50));
  CHECK(tight.max_normalized_error == Approx(5));
  CHECK(tight.first_failure->tight == Approx(0.01));
  CHECK(tight.first_failure->bound == Approx(0.1));

  const Metrics worst = compare_head({0, 0, 0, false}, ker, r, DType::f32, BoundChoice::worst);
  CHECK(!worst.passed());
  CHECK(worst.failures() == 1);
  CHECK(worst.first_over()->index.col == 3);
  ker(0, 3) = 0.05;  // now within the worst-case bound everywhere
  CHECK(compare_head({0, 0, 0, false}, ker, r, DType::f32, BoundChoice::worst).passed());
  CHECK(!compare_head({0, 0, 0, false}, ker, r, DType::f32).passed());
}

TEST_CASE("a tight bound above the worst-case one is capped at it", "[compare]") {
  MatrixR ref = MatrixR::Zero(1, 1), ker = MatrixR::Constant(1, 1, 0.2);
  const Metrics m = compare_head({0, 0, 0, false}, ker, reference_of(ref, 0.1, 1.0), DType::f32);
  CHECK(m.over_tight == 1);
  CHECK(m.max_tight_error == Approx(2));
}

TEST_CASE("NaN or Inf where the reference is finite never passes, whatever the bound", "[compare]") {
  MatrixR ref = MatrixR::Ones(1, 3), ker = MatrixR::Ones(1, 3);
  ker(0, 0) = kNaN;
  ker(0, 2) = -kInf;
  const Metrics m = compare_head({0, 0, 0, false}, ker, reference_of(ref, 1e300), DType::f16);
  CHECK(m.over_bound == 2);
  CHECK(m.nan_kernel == 1);
  CHECK(m.neginf_kernel == 1);
  CHECK(m.first_failure->index.col == 0);
  CHECK(std::isinf(m.max_normalized_error));
}

TEST_CASE("NaN never passes, not even where the reference is NaN from a NaN input", "[compare]") {
  MatrixR ref(1, 2), ker(1, 2);
  ref << kNaN, 1;
  ker << kNaN, 1;
  const Metrics m = compare_head({0, 0, 0, false}, ker, reference_of(ref, 1), DType::f32);
  CHECK(m.nan_reference == 1);
  CHECK(m.over_bound == 1);
  CHECK(m.first_failure->index.col == 0);
}

TEST_CASE("an infinite reference (a masked score) passes only on the same infinity", "[compare]") {
  MatrixR ref(1, 3), ker(1, 3);
  ref << -kInf, -kInf, -kInf;
  ker << -kInf, -1e30, kInf;
  const Metrics m = compare_head({0, 0, 0, false}, ker, reference_of(ref, 0), DType::f32);
  CHECK(m.inf_reference == 3);
  CHECK(m.over_bound == 2);
  CHECK(m.first_failure->index.col == 1);
}

TEST_CASE("per-row quantities are reported with column -1", "[compare]") {
  MatrixR ref = MatrixR::Zero(4, 1), ker = MatrixR::Zero(4, 1);
  ker(3, 0) = 1;
  const Metrics m = compare_head({0, 1, 0, true}, ker, reference_of(ref, 0.5), DType::f32);
  CHECK(m.first_failure->index == Index4{0, 1, 3, -1});
}

TEST_CASE("ULP distance is counted in the kernel's stored format", "[compare]") {
  MatrixR ref(1, 1), ker(1, 1);
  ref << 1.0;
  ker << 1.0 + 3 * std::ldexp(1.0, -10);  // three fp16 steps above 1
  CHECK(compare_head({0, 0, 0, false}, ker, reference_of(ref, 1), DType::f16).max_ulp == 3);
  CHECK(compare_head({0, 0, 0, false}, ker, reference_of(ref, 1), DType::f32).max_ulp == 3 * 8192);
}

TEST_CASE("merging heads keeps the first failure in order and the worst overall", "[compare]") {
  MatrixR ref = MatrixR::Zero(2, 2);
  MatrixR a = ref, b = ref;
  a(1, 1) = 0.2;
  b(0, 0) = 0.9;
  Metrics total = compare_head({0, 0, 0, false}, a, reference_of(ref, 0.1), DType::f32);
  merge_metrics(total, compare_head({0, 1, 0, false}, b, reference_of(ref, 0.1), DType::f32));
  CHECK(total.elements == 8);
  CHECK(total.over_bound == 2);
  CHECK(total.first_failure->index == Index4{0, 0, 1, 1});
  CHECK(total.worst->index == Index4{0, 1, 0, 0});
  CHECK(total.max_normalized_error == Approx(9));
}

TEST_CASE("merging in any order keeps the failure first in (b, h, row, col) order and the worst", "[compare]") {
  // Windows of rows, each over every head: the second window's head 0 comes before the first
  // window's head 1.
  MatrixR ref = MatrixR::Zero(1, 2), bad = ref;
  bad(0, 1) = 0.2;
  HeadSpot h1_row0{0, 1, 0, false};
  const std::vector<std::int64_t> row9{9};
  HeadSpot h0_row9{0, 0, 0, false};
  h0_row9.rows = &row9;
  const Metrics first_window = compare_head(h1_row0, bad, reference_of(ref, 0.1), DType::f32);
  MatrixR worse = ref;
  worse(0, 0) = 0.2;  // as bad as the other: the earlier element is the worst of equals
  const Metrics second_window = compare_head(h0_row9, worse, reference_of(ref, 0.1), DType::f32);
  for (const bool swapped : {false, true}) {
    Metrics total = swapped ? second_window : first_window;
    merge_metrics(total, swapped ? first_window : second_window);
    CHECK(total.elements == 4);
    CHECK(total.over_tight == 2);
    CHECK(total.first_failure->index == Index4{0, 0, 9, 0});
    CHECK(total.worst->index == Index4{0, 0, 9, 0});
  }
}
}  // namespace fc

// The FP64 reference against cases worked by hand, and the blocked (online softmax) and
// split-KV chains against the full one.
#include <cmath>
#include <limits>
#include <vector>

#include "catch.h"
#include "harness/inputs.h"
#include "reference/attention.h"
#include "harness/random_cases.h"

namespace fc {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// One batch, one head, fp16 inputs given row by row (small integers: exact in fp16).
AttentionInputs hand_inputs(std::int64_t sq, std::int64_t sk, std::int64_t d, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v, double scale = 1.0) {
  AttentionInputs in;
  in.problem.shape = {1, 1, sq, sk, d};
  in.problem.dtype = DType::f16;
  in.problem.scale = scale;
  in.q = HostTensor(DType::f16, {1, 1, sq, d});
  in.k = HostTensor(DType::f16, {1, 1, sk, d});
  in.v = HostTensor(DType::f16, {1, 1, sk, d});
  for (std::size_t i = 0; i < q.size(); ++i) in.q.set(static_cast<std::int64_t>(i), q[i]);
  for (std::size_t i = 0; i < k.size(); ++i) in.k.set(static_cast<std::int64_t>(i), k[i]);
  for (std::size_t i = 0; i < v.size(); ++i) in.v.set(static_cast<std::int64_t>(i), v[i]);
  return in;
}

FullReference full(const AttentionInputs& in) {
  return full_reference(head_inputs(in, 0, 0), nominal_arithmetic(DType::f16));
}

// Which keys row i may attend: a column of -inf scores, p = 0 exactly.
std::vector<bool> attended(const FullReference& r, Eigen::Index row) {
  std::vector<bool> a;
  for (Eigen::Index j = 0; j < r.scores.value.cols(); ++j) a.push_back(r.scores.value(row, j) != -kInf);
  return a;
}

// max |a - reference| relative to max(1, max |reference|); infinite where the shapes differ or
// either holds a NaN or an infinity (maxCoeff passes over a NaN).
double relative_gap(const MatrixR& a, const MatrixR& reference) {
  if (a.rows() != reference.rows() || a.cols() != reference.cols() || !a.allFinite() || !reference.allFinite()) {
    return std::numeric_limits<double>::infinity();
  }
  return (a - reference).cwiseAbs().maxCoeff() / std::max(1.0, reference.cwiseAbs().maxCoeff());
}

// fn(case, head inputs, arithmetic, full reference) on every head of the first `cases` seeded random cases.
template <class Fn>
void for_each_random_head(std::uint64_t cases, Fn fn) {
  for (std::uint64_t seed = 1; seed <= cases; ++seed) {
    const RandomCase c = random_case(seed);
    const AttentionInputs inputs = generate_inputs(c.spec);
    const ChainArithmetic a = nominal_arithmetic(c.spec.dtype);
    for (std::int64_t bh = 0; bh < c.spec.shape.batch * c.spec.shape.heads; ++bh) {
      const HeadInputs in = head_inputs(inputs, bh / c.spec.shape.heads, bh % c.spec.shape.heads);
      fn(c, in, a, full_reference(in, a));
    }
  }
}

}  // namespace

TEST_CASE("a 2x2 case worked by hand", "[reference]") {
  // q = [1; 2], k = [1; -1], v = [1; 3], D = 1, scale 1:
  // s = [[1, -1], [2, -2]]; p row i = [1, e^(-2 s_i0)] / (1 + e^(-2 s_i0)); o = 1 + 2 p_i1.
  const FullReference r = full(hand_inputs(2, 2, 1, {1, 2}, {1, -1}, {1, 3}));
  CHECK(r.scores.value(0, 0) == 1);
  CHECK(r.scores.value(0, 1) == -1);
  CHECK(r.scores.value(1, 0) == 2);
  CHECK(r.scores.value(1, 1) == -2);
  for (int i = 0; i < 2; ++i) {
    const double e = std::exp(-2.0 * (i + 1));
    CHECK(r.softmax.p.value(i, 0) == Approx(1 / (1 + e)).epsilon(1e-15));
    CHECK(r.softmax.p.value(i, 1) == Approx(e / (1 + e)).epsilon(1e-15));
    CHECK(r.out.value(i, 0) == Approx(1 + 2 * e / (1 + e)).epsilon(1e-15));
    CHECK(r.softmax.max.value(i, 0) == i + 1);
    CHECK(r.softmax.sum.value(i, 0) == Approx(1 + e).epsilon(1e-15));
  }
}

TEST_CASE("a 3x3 causal case worked by hand", "[reference]") {
  // D = 2, scale 1/2: q = k = [[1,0],[0,1],[1,1]] gives q.k = [[1,0,1],[0,1,1],[1,1,2]].
  AttentionInputs in = hand_inputs(3, 3, 2, {1, 0, 0, 1, 1, 1}, {1, 0, 0, 1, 1, 1}, {2, 0, 0, 4, 6, 8}, 0.5);
  in.problem.mask.causal = Causal::top_left;
  const FullReference r = full(in);
  // Row 0 sees key 0 only: p = [1, 0, 0], o = v0.
  CHECK(r.softmax.p.value(0, 0) == 1);
  CHECK(r.softmax.p.value(0, 1) == 0);
  CHECK(r.scores.value(0, 1) == -kInf);
  CHECK(r.out.value(0, 0) == 2);
  CHECK(r.out.value(0, 1) == 0);
  // Row 1 sees keys 0, 1 with scores 0, 0.5: p = [1, e^0.5] / (1 + e^0.5).
  const double e = std::exp(0.5);
  CHECK(r.softmax.p.value(1, 1) == Approx(e / (1 + e)).epsilon(1e-15));
  CHECK(r.out.value(1, 0) == Approx(2 / (1 + e)).epsilon(1e-15));
  CHECK(r.out.value(1, 1) == Approx(4 * e / (1 + e)).epsilon(1e-15));
  // Row 2 sees all with scores 0.5, 0.5, 1.
  const double z = 2 * std::exp(0.5) + std::exp(1.0);
  CHECK(r.softmax.p.value(2, 2) == Approx(std::exp(1.0) / z).epsilon(1e-15));
  CHECK(r.out.value(2, 1) == Approx((4 * std::exp(0.5) + 8 * std::exp(1.0)) / z).epsilon(1e-15));
}

TEST_CASE("a fully masked row has max -inf, sum 0, probabilities 0 and output 0", "[reference]") {
  AttentionInputs in = hand_inputs(2, 3, 1, {1, 2}, {1, 2, 3}, {1, 2, 3});
  in.problem.mask.key_lengths = {0};
  const FullReference r = full(in);
  for (int i = 0; i < 2; ++i) {
    CHECK(r.softmax.max.value(i, 0) == -kInf);
    CHECK(r.softmax.sum.value(i, 0) == 0);
    CHECK(r.softmax.p.value.row(i).isZero(0));
    CHECK(r.out.value.row(i).isZero(0));
    CHECK(r.out.bound(i, 0) < 1e-7);
  }
  const ReferenceTensors t = compute_reference(in, {});
  REQUIRE(t.masked_rows.size() == 2);
  CHECK(t.masked_rows[1].row == 1);
  CHECK(t.lse.get(0) == -kInf);
}

TEST_CASE("a NaN score makes its row NaN in every chain, never a masked row", "[reference]") {
  AttentionInputs in = hand_inputs(2, 3, 1, {1, 2}, {1, 2, 3}, {1, 2, 3});
  in.q.set(1, std::numeric_limits<double>::quiet_NaN());  // row 1's every score is NaN
  const HeadInputs head = head_inputs(in, 0, 0);
  const ChainArithmetic a = nominal_arithmetic(DType::f32);
  const FullReference f = full_reference(head, a);
  const BlockedReference b = blocked_reference(head, 0, 3, 2, a);
  for (const Bounded* out : {&f.out, &b.out}) {
    CHECK(std::isnan(out->value(1, 0)));
    CHECK(std::isfinite(out->value(0, 0)));
  }
  CHECK(std::isnan(f.softmax.max.value(1, 0)));
  CHECK(std::isnan(f.lse.value(1, 0)));
  CHECK(std::isnan(b.lse.value(1, 0)));
  CHECK(std::isnan(b.tiles[0].softmax.max.value(1, 0)));
}

TEST_CASE("an additive bias of -inf masks exactly like a boolean mask", "[reference]") {
  AttentionInputs biased = hand_inputs(2, 3, 1, {1, 2}, {1, 2, 3}, {1, 2, 3});
  AttentionInputs boolean = biased;
  biased.problem.mask.dense = HostTensor(DType::f32, {1, 1, 2, 3});
  boolean.problem.mask.dense = HostTensor(DType::boolean, {1, 1, 2, 3});
  // Row 0: key 1 masked, bias 0.5 on key 2. Row 1: every key masked.
  const std::vector<double> bias{0, -kInf, 0.5, -kInf, -kInf, -kInf};
  const std::vector<double> keep{1, 0, 1, 0, 0, 0};
  for (int i = 0; i < 6; ++i) {
    biased.problem.mask.dense.set(i, bias[static_cast<std::size_t>(i)]);
    boolean.problem.mask.dense.set(i, keep[static_cast<std::size_t>(i)]);
  }
  const FullReference rb = full(biased), rm = full(boolean);
  CHECK(attended(rb, 0) == std::vector<bool>{true, false, true});
  CHECK(attended(rm, 0) == std::vector<bool>{true, false, true});
  CHECK(rb.scores.value(0, 2) == 3 + 0.5);
  CHECK(rm.scores.value(0, 2) == 3);
  // Row 0 of the biased case: scores 1, 3.5 -> p = [1, e^2.5] / (1 + e^2.5).
  const double e = std::exp(2.5);
  CHECK(rb.softmax.p.value(0, 2) == Approx(e / (1 + e)).epsilon(1e-15));
  CHECK(rb.softmax.max.value(1, 0) == -kInf);
  CHECK(rm.out.value.row(1).isZero(0));
  CHECK(rb.out.value.row(1).isZero(0));
}

// Every key of row 0 biased by float32's minimum: its scores are all about -3.4e38, each
// bounded by about 2e31, so its probabilities may be anything in [0, 1]; whatever they are,
// the output is a weighted mean of v's rows, which the bound of every chain keeps to.
TEST_CASE("a row whose every key carries a huge finite bias is bounded by the range of v", "[reference]") {
  AttentionInputs in = hand_inputs(2, 4, 2, {1, 0, 0, 1}, {1, 2, 3, 4, 0, 1, 2, 0},
                                   {1, 0.5, 2, 0.25, 3, 2, -1, 1});
  const double f32_min = -static_cast<double>(std::numeric_limits<float>::max());
  in.problem.mask.dense = HostTensor(DType::f32, {1, 1, 2, 4});
  for (std::int64_t j = 0; j < 4; ++j) in.problem.mask.dense.set(j, f32_min);  // row 0 only
  const HeadInputs head = head_inputs(in, 0, 0);
  const ChainArithmetic a = nominal_arithmetic(DType::f16);
  const FullReference f = full_reference(head, a);
  const BlockedReference b = blocked_reference(head, 0, 4, 2, a);
  const SplitReference sp = split_reference(head, 2, 2, a);
  const double low[2] = {-1, 0.25}, high[2] = {3, 2};
  for (const Bounded* out : {&f.out, &b.out, &sp.out}) {
    for (Eigen::Index c = 0; c < 2; ++c) {
      const double o = out->value(0, c);
      INFO("column " << c << ": " << o << " +- " << out->bound(0, c));
      CHECK(o >= low[c]);
      CHECK(o <= high[c]);
      for (const MatrixR* bound : {&out->bound, &out->tight}) {
        // Either end of the range may be right (all the weight on one key)...
        CHECK(std::fabs(low[c] - o) <= (*bound)(0, c));
        CHECK(std::fabs(high[c] - o) <= (*bound)(0, c));
        // ... but not a value past the far end by more than the rounding of the weights.
        const double past_far_end = o - low[c] > high[c] - o ? low[c] - 0.05 : high[c] + 0.05;
        CHECK(std::fabs(past_far_end - o) > (*bound)(0, c));
        CHECK(std::fabs(7.0 - o) > (*bound)(0, c));
      }
      CHECK(out->bound(1, c) < 1e-2);  // an ordinary row's bound is not the range's
    }
  }
}

// The cap's rounding includes the accumulation's floor: an fp16 accumulator flushes products
// below its smallest normal, so a kernel may write 0 for a column whose v are all about 1e-4.
TEST_CASE("the range cap of a row of huge biases allows products flushed by an fp16 accumulator", "[reference]") {
  AttentionInputs in = hand_inputs(1, 4, 1, {1}, {1, 2, 3, 4}, {1e-4, 1.5e-4, 2e-4, 1e-4});
  in.problem.mask.dense = HostTensor(DType::f32, {1, 1, 1, 4});
  for (std::int64_t j = 0; j < 4; ++j) in.problem.mask.dense.set(j, -3.4e38);
  ChainArithmetic a = nominal_arithmetic(DType::f16);
  a.pv.accumulate = DType::f16;
  const HeadInputs head = head_inputs(in, 0, 0);
  for (const Bounded& out : {full_reference(head, a).out, blocked_reference(head, 0, 4, 2, a).out}) {
    INFO(out.value(0, 0) << " +- " << out.bound(0, 0));
    CHECK(std::fabs(out.value(0, 0)) <= out.bound(0, 0));
    CHECK(std::fabs(out.value(0, 0)) <= out.tight(0, 0));
    CHECK(out.bound(0, 0) < 0.01);  // still capped: the chain's own bound is about sum |v| / 1e-4
  }
}

TEST_CASE("causal masks align top-left and bottom-right when Sq != Sk", "[reference]") {
  SECTION("Sq 2, Sk 4") {
    AttentionInputs in = hand_inputs(2, 4, 1, {1, 1}, {1, 1, 1, 1}, {1, 2, 3, 4});
    in.problem.mask.causal = Causal::top_left;
    FullReference r = full(in);
    CHECK(attended(r, 0) == std::vector<bool>{true, false, false, false});
    CHECK(attended(r, 1) == std::vector<bool>{true, true, false, false});
    CHECK(r.out.value(1, 0) == Approx(1.5).epsilon(1e-15));  // equal scores: mean of v0, v1
    in.problem.mask.causal = Causal::bottom_right;
    r = full(in);
    CHECK(attended(r, 0) == std::vector<bool>{true, true, true, false});
    CHECK(attended(r, 1) == std::vector<bool>{true, true, true, true});
    CHECK(r.out.value(0, 0) == Approx(2.0).epsilon(1e-15));
  }
  SECTION("Sq 4, Sk 2: bottom-right leaves the first rows with no key") {
    AttentionInputs in = hand_inputs(4, 2, 1, {1, 1, 1, 1}, {1, 1}, {1, 3});
    in.problem.mask.causal = Causal::bottom_right;
    const FullReference r = full(in);
    CHECK(attended(r, 0) == std::vector<bool>{false, false});
    CHECK(attended(r, 1) == std::vector<bool>{false, false});
    CHECK(attended(r, 2) == std::vector<bool>{true, false});
    CHECK(attended(r, 3) == std::vector<bool>{true, true});
    CHECK(r.out.value(0, 0) == 0);
    CHECK(r.out.value(3, 0) == Approx(2.0).epsilon(1e-15));
  }
}

TEST_CASE("key padding masks keys at and past each batch's length", "[reference]") {
  CaseSpec spec;
  spec.shape = {2, 1, 3, 5, 64};
  spec.mask = "padding=2,5";
  const AttentionInputs in = generate_inputs(spec);
  const FullReference b0 = full_reference(head_inputs(in, 0, 0), nominal_arithmetic(DType::f16));
  const FullReference b1 = full_reference(head_inputs(in, 1, 0), nominal_arithmetic(DType::f16));
  CHECK(attended(b0, 2) == std::vector<bool>{true, true, false, false, false});
  CHECK(attended(b1, 2) == std::vector<bool>{true, true, true, true, true});
}

TEST_CASE("blocked online softmax equals the full softmax to 1e-12 at every tile width", "[reference]") {
  for_each_random_head(60, [](const RandomCase& c, const HeadInputs& in, const ChainArithmetic& a, const FullReference& f) {
    for (std::int64_t width : {1L, 7L, 16L, 64L, 1000L}) {
      const BlockedReference b = blocked_reference(in, 0, in.k().rows(), width, a);
      INFO(c.spec.label() << " tile " << width);
      CHECK(relative_gap(b.out.value, f.out.value) <= 1e-12);
      // The last tile's running max and sum are the row max and sum.
      const TileReference& last = b.tiles.back();
      for (Eigen::Index r = 0; r < in.q.rows(); ++r) {
        CHECK(last.softmax.max.value(r, 0) == f.softmax.max.value(r, 0));
        const double l = f.softmax.sum.value(r, 0);
        CHECK(std::fabs(last.softmax.sum.value(r, 0) - l) <= 1e-12 * std::max(1.0, l));
      }
    }
  });
}

TEST_CASE("split-KV partials combined by log-sum-exp equal the full output to 1e-12", "[reference]") {
  for_each_random_head(60, [](const RandomCase& c, const HeadInputs& in, const ChainArithmetic& a, const FullReference& f) {
    for (std::int64_t splits : {1L, 2L, 3L, 8L, 40L}) {  // 40 splits leave some empty
      const SplitReference s = split_reference(in, splits, 16, a);
      INFO(c.spec.label() << " splits " << splits);
      CHECK(relative_gap(s.out.value, f.out.value) <= 1e-12);
      CHECK(s.out.value.allFinite());
    }
  });
}

TEST_CASE("split ranges cover the keys in whole tiles, later splits possibly empty", "[reference]") {
  // 100 keys, tiles of 16 -> 7 tiles; 3 splits of 3 tiles: [0,48) [48,96) [96,100).
  CHECK(split_range(100, 3, 16, 0).begin == 0);
  CHECK(split_range(100, 3, 16, 0).end == 48);
  CHECK(split_range(100, 3, 16, 1).end == 96);
  CHECK(split_range(100, 3, 16, 2).end == 100);
  // 4 splits of 2 tiles: the last one holds the 7th tile alone, [96, 100).
  CHECK(split_range(100, 4, 16, 3).begin == 96);
  CHECK(split_range(100, 4, 16, 3).end == 100);
  // 5 splits of 2 tiles: the last one would start at key 128, so it is empty.
  CHECK(split_range(100, 5, 16, 4).begin == 100);
  CHECK(split_range(100, 5, 16, 4).end == 100);
}

namespace {

// Attention of one head by plain loops over the input tensors' flat [B,H,S,D] layout,
// independent of head_inputs() and the Eigen chains.
MatrixR loop_attention(const AttentionInputs& in, std::int64_t b, std::int64_t h) {
  const Shape& s = in.problem.shape;
  auto at = [&](const HostTensor& t, std::int64_t len, std::int64_t row, std::int64_t d) {
    return t.get(((b * s.heads + h) * len + row) * s.head_dim + d);
  };
  MatrixR out = MatrixR::Zero(s.q_len, s.head_dim);
  for (std::int64_t i = 0; i < s.q_len; ++i) {
    std::vector<double> score(static_cast<std::size_t>(s.kv_len));
    double top = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < s.kv_len; ++j) {
      double dot = 0;
      for (std::int64_t d = 0; d < s.head_dim; ++d) dot += at(in.q, s.q_len, i, d) * at(in.k, s.kv_len, j, d);
      score[j] = in.problem.scale * dot + mask_bias(in.problem, b, h, i, j);
      top = std::max(top, score[j]);
    }
    if (top == -std::numeric_limits<double>::infinity()) continue;
    double sum = 0;
    for (double& x : score) sum += (x = std::exp(x - top));
    for (std::int64_t j = 0; j < s.kv_len; ++j) {
      for (std::int64_t d = 0; d < s.head_dim; ++d) out(i, d) += score[j] / sum * at(in.v, s.kv_len, j, d);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("whole-tensor reference matches the per-head chains", "[reference]") {
  CaseSpec spec;
  spec.shape = {2, 3, 33, 70, 64};
  spec.mask = "causal-br+padding";
  spec.seed = 5;
  const AttentionInputs in = generate_inputs(spec);
  const ReferenceTensors t = compute_reference(in, {16, 3});
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t h = 0; h < 3; ++h) {
      const FullReference f = full_reference(head_inputs(in, b, h), nominal_arithmetic(DType::f16));
      CHECK(head_matrix(t.output, b, h) == f.out.value);
      CHECK(relative_gap(head_matrix(t.output, b, h), loop_attention(in, b, h)) <= 1e-12);
      CHECK(head_matrix(t.probs, b, h) == f.softmax.p.value);
      CHECK(relative_gap(head_matrix(t.paged_output, b, h), f.out.value) <= 1e-12);
      CHECK(relative_gap(head_matrix(t.combined_output, b, h), f.out.value) <= 1e-12);
    }
  }
  CHECK(t.page_acc.dims() == Dims{2, 3, 5, 33, 64});
  CHECK(t.split_lse.dims() == Dims{2, 3, 3, 33});
}

}  // namespace fc

namespace fc {

// A head read with its mask (BiasForm::mask: the bias of each element read where it is
// needed) gives the scores of the same head with its bias formed into a matrix, bit for bit,
// for whole heads and for rows spread over the head (a sample), over every kind of mask part.
TEST_CASE("a head's mask read where it is needed gives the scores of its bias matrix exactly", "[reference]") {
  for (const char* mask : {"causal-br", "bool+causal", "bias", "alibi+window=6,2", "padding=20,33+causal",
                           "masked-rows", "causal+masked-bias=min"}) {
    CaseSpec spec;
    spec.shape = {2, 2, 20, 33, 32};
    spec.mask = mask;
    spec.seed = 11;
    const AttentionInputs in = generate_inputs(spec);
    const ChainArithmetic a = nominal_arithmetic(in.problem.dtype);
    const std::vector<std::int64_t> rows = {0, 3, 4, 19};
    for (std::int64_t b = 0; b < 2; ++b) {
      for (std::int64_t h = 0; h < 2; ++h) {
        INFO(mask << " b=" << b << " h=" << h);
        const HeadInputs whole = head_inputs(in, b, h, BiasForm::mask);
        CHECK(whole.bias.size() == 0);  // nothing S x S formed
        const std::pair<HeadInputs, HeadInputs> pairs[] = {
            {head_inputs(in, b, h), whole},
            {head_inputs(in, b, h, rows), head_inputs(in, b, h, rows, BiasForm::mask)}};
        for (const auto& [matrix, masked] : pairs) {
          const Bounded x = eval_qk(matrix, 0, 33, a.qk), y = eval_qk(masked, 0, 33, a.qk);
          CHECK(x.value.cwiseEqual(y.value).all());
          CHECK(x.bound.cwiseEqual(y.bound).all());
          CHECK(x.tight.cwiseEqual(y.tight).all());
          for (std::int64_t r = 0; r < matrix.bias.rows(); ++r) {
            for (std::int64_t j = 0; j < 33; ++j) CHECK(masked.bias_at(r, j) == matrix.bias(r, j));
          }
        }
      }
    }
  }
}

}  // namespace fc

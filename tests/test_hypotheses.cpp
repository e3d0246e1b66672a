// Causes from evidence: each hypothesis of harness/trace/hypotheses/ is planted, outside the
// fault catalog, in a small CPU implementation whose stages are computed with the bug, and the
// attribution must name it with its evidence.
#include <cmath>
#include <functional>
#include <limits>

#include "catch.h"
#include "core/numeric.h"
#include "support/full_chain.h"
#include "harness/inputs.h"
#include "harness/trace/judge.h"
#include "harness/trace/session.h"
#include "kernels/implementation.h"
#include "kernels/cpu_emulated/buffer_io.h"
#include "kernels/cpu_emulated/emulate.h"
#include "reference/attention.h"
#include "stages/flags.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// qk, softmax and P.V computed per head in the emulated arithmetic. `scores_from` may change
// the inputs the scores are formed from; `output_of` may replace a head's output (given the
// FP64 probabilities and every head's inputs).
class Planted final : public Implementation {
 public:
  using ScoresFrom = std::function<void(const AttentionInputs&, std::int64_t b, std::int64_t h, HeadInputs&)>;
  using OutputOf = std::function<void(const AttentionInputs&, std::int64_t b, std::int64_t h, const MatrixR& p, MatrixR& out)>;
  Planted(ScoresFrom scores, OutputOf output) : scores_from_(std::move(scores)), output_of_(std::move(output)) {}

  std::string name() const override { return "planted"; }
  std::string summary() const override { return "test"; }
  bool on_gpu() const override { return false; }
  StageGraph stage_graph(const Problem& p) const override { return test::full_chain_graph(p); }
  void prepare(const Problem& p, Workspace& ws, bool) override {
    const Shape& s = p.shape;
    scores_ = &ws.allocate("scores", DType::f32, s.batch * s.heads * s.q_len * s.kv_len);
    probs_ = &ws.allocate("probs", DType::f32, s.batch * s.heads * s.q_len * s.kv_len);
    out_ = &ws.allocate("output", p.dtype, s.batch * s.heads * s.q_len * s.head_dim);
  }
  void run(RunContext& ctx) override {
    const Shape& s = ctx.inputs.problem.shape;
    for (std::int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
      const std::int64_t b = bh / s.heads, h = bh % s.heads;
      HeadInputs in = head_inputs(ctx.inputs, b, h);
      if (scores_from_) scores_from_(ctx.inputs, b, h, in);
      const MatrixR sc = emu::qk(in, 0, s.kv_len, DType::f32);
      const emu::Softmax sm = emu::softmax(sc, DType::f32);
      MatrixR out = emu::pv(sm.p, in.v(), nullptr, DType::f32, ctx.inputs.problem.dtype);
      if (output_of_) output_of_(ctx.inputs, b, h, sm.p, out);
      emu::write_block(*scores_, bh, sc);
      emu::write_block(*probs_, bh, sm.p);
      emu::write_block(*out_, bh, out);
    }
    const Dims sd{s.batch, s.heads, s.q_len, s.kv_len};
    ctx.tap->capture(0, 0, scores_->view(sd));
    ctx.tap->capture(1, 0, probs_->view(sd));
    ctx.tap->capture(2, 0, out_->view({s.batch, s.heads, s.q_len, s.head_dim}));
  }

 private:
  ScoresFrom scores_from_;
  OutputOf output_of_;
  Buffer *scores_ = nullptr, *probs_ = nullptr, *out_ = nullptr;
};

CaseSpec case_of(const std::string& mask) {
  CaseSpec s;
  s.shape = {2, 3, 24, 40, 64};
  s.mask = mask;
  s.seed = 11;
  return s;
}

Divergence diverged(Planted& impl, const CaseSpec& spec) {
  const AttentionInputs in = generate_inputs(spec);
  const CaseResult r = judge_case(impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), nullptr);
  REQUIRE(r.verdict == Verdict::diverged);
  INFO(r.divergence->cause << ": " << r.divergence->evidence);
  return *r.divergence;
}

// The FP64 attention output of a head with its probabilities changed by `change`.
MatrixR output_with(const AttentionInputs& in, std::int64_t b, std::int64_t h,
                    const std::function<void(MatrixR& p)>& change) {
  const HeadInputs head = head_inputs(in, b, h);
  MatrixR s = head.scale * (head.q * head.k().transpose()) + head.bias;
  MatrixR p = MatrixR::Zero(s.rows(), s.cols());
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const double m = s.row(i).maxCoeff();
    if (m == -kInf) continue;
    for (Eigen::Index j = 0; j < s.cols(); ++j) p(i, j) = std::exp(s(i, j) - m);
  }
  change(p);
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    const double l = p.row(i).sum();
    if (l > 0) p.row(i) /= l;
  }
  return p * head.v();
}

// The captured output with this quantity and tile.
Captured& captured_at(TraceRun& run, Quantity q, int tile) {
  for (Captured& c : run.captured) {
    const Stage& st = run.graph.stages[c.stage];
    if (st.outputs[c.output].quantity == q && st.tile == tile) return c;
  }
  FAIL("no captured output of that quantity and tile");
  throw;
}

// A real traced run of a CPU implementation on a case_of("none") of this shape: its captures
// are edited to plant a bug's evidence, then judged.
struct TracedRun {
  TracedRun(const std::string& name, const Shape& shape, const std::string& mask = "none") : spec(case_of(mask)) {
    spec.shape = shape;
    in = generate_inputs(spec);
    impl = make_implementation(name);
    run = run_traced(*impl, in, nullptr, true);
  }
  Captured& at(Quantity q, int tile) { return captured_at(run, q, tile); }
  Divergence judged() {
    const CaseResult r = judge_run(impl->name(), in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), run);
    REQUIRE(r.divergence);
    INFO(r.divergence->cause << ": " << r.divergence->evidence);
    return *r.divergence;
  }
  CaseSpec spec;
  AttentionInputs in;
  std::unique_ptr<Implementation> impl;
  TraceRun run;
};

// Elements [first, end) of a 16-bit captured output hold its buffer's poison again (never
// written), as its flags then say; with `landed`, each one's value is first copied to the
// element `first` places before it.
void unwrite_from(Captured& out, std::int64_t first, bool landed) {
  auto* bits = out.tensor.data_as<std::uint16_t>();
  const auto poison = static_cast<std::uint16_t>(poison_bits(out.tensor.dtype(), out.view.buffer_id));
  for (std::int64_t i = first; i < out.tensor.numel(); ++i) {
    if (landed) bits[i - first] = bits[i];
    bits[i] = poison;
  }
  out.flags.unwritten = static_cast<unsigned long long>(out.tensor.numel() - first);
  out.flags.first_unwritten = static_cast<unsigned long long>(first);
}

}  // namespace

TEST_CASE("hypothesis mask-mismatch: a causal mask that also masks the diagonal is named, with its diagonal",
          "[trace][hypotheses]") {
  Planted impl(
      [](const AttentionInputs&, std::int64_t, std::int64_t, HeadInputs& in) {
        const std::int64_t diagonal = in.k().rows() - in.q.rows();
        for (Eigen::Index i = 0; i < in.q.rows(); ++i) in.bias(i, i + diagonal) = -kInf;
      },
      nullptr);
  const Divergence d = diverged(impl, case_of("causal-br"));
  CHECK(d.stage == "qk");
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("the causal diagonal itself") != std::string::npos);
}

TEST_CASE("hypothesis mask-mismatch: a key padding one key too long is named with the length used",
          "[trace][hypotheses]") {
  Planted impl(
      [](const AttentionInputs&, std::int64_t b, std::int64_t, HeadInputs& in) {
        if (b == 1) in.bias.col(30).setZero();  // batch 1's length is 30: key 30 attended
      },
      nullptr);
  const Divergence d = diverged(impl, case_of("padding=40,30"));
  CHECK(d.stage == "qk");
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("padding length 31 used for batch 1 (its length is 30)") != std::string::npos);
}

TEST_CASE("hypothesis mask-mismatch: rows with no key holding the uniform average of V", "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR&, MatrixR& out) {
    const HeadInputs head = head_inputs(in, b, h);
    for (Eigen::Index i = 0; i < out.rows(); ++i) {
      if ((head.bias.row(i).array() == -kInf).all()) out.row(i) = head.v().colwise().mean();
    }
  });
  const Divergence d = diverged(impl, case_of("masked-rows"));
  CHECK(d.stage == "pv");
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("uniform average of V") != std::string::npos);
}

TEST_CASE("hypothesis mask-mismatch: rows with no key holding attention with the mask ignored", "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR&, MatrixR& out) {
    const HeadInputs head = head_inputs(in, b, h);
    const MatrixR unmasked = output_with(in, b, h, [&](MatrixR& p) {
      for (Eigen::Index i = 0; i < p.rows(); ++i) {
        if (!(head.bias.row(i).array() == -kInf).all()) continue;
        const Eigen::RowVectorXd s = head.scale * (head.q.row(i) * head.k().transpose());
        p.row(i) = (s.array() - s.maxCoeff()).exp().matrix();
      }
    });
    for (Eigen::Index i = 0; i < out.rows(); ++i) {
      if ((head.bias.row(i).array() == -kInf).all()) out.row(i) = unmasked.row(i);
    }
  });
  const Divergence d = diverged(impl, case_of("masked-rows"));
  CHECK(d.stage == "pv");
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("attention over every key with the mask ignored") != std::string::npos);
}

TEST_CASE("hypothesis wrong-operand: K read from the previous head", "[trace][hypotheses]") {
  Planted impl(
      [](const AttentionInputs& in, std::int64_t b, std::int64_t h, HeadInputs& head) {
        if (h > 0) head.set_kv(head_inputs(in, b, h - 1).k(), head.v());
      },
      nullptr);
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.stage == "qk");
  CHECK(d.index.h == 1);
  CHECK(d.cause == "wrong-operand");
  CHECK(d.evidence.find("K read from head 0") != std::string::npos);
}

TEST_CASE("hypothesis wrong-operand: Q read 5 rows late", "[trace][hypotheses]") {
  Planted impl(
      [](const AttentionInputs& in, std::int64_t b, std::int64_t h, HeadInputs& head) {
        const HeadInputs own = head_inputs(in, b, h);
        for (Eigen::Index i = 0; i + 5 < head.q.rows(); ++i) head.q.row(i) = own.q.row(i + 5);
      },
      nullptr);
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.cause == "wrong-operand");
  CHECK(d.evidence.find("Q read 5 rows past") != std::string::npos);
}

TEST_CASE("hypothesis wrong-operand in P.V: V read transposed", "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR& p, MatrixR& out) {
    const MatrixR v = head_inputs(in, b, h).v();
    MatrixR transposed(v.rows(), v.cols());
    for (Eigen::Index j = 0; j < v.rows(); ++j) {
      for (Eigen::Index c = 0; c < v.cols(); ++c) {
        const Eigen::Index flat = c * v.rows() + j;
        transposed(j, c) = v(flat / v.cols(), flat % v.cols());
      }
    }
    out = emu::pv(p, transposed, nullptr, DType::f32, in.problem.dtype);
  });
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.stage == "pv");
  CHECK(d.cause == "wrong-operand");
  CHECK(d.evidence.find("V read transposed") != std::string::npos);
}

TEST_CASE("hypothesis misplaced-values: each head's output written into the next head's slot", "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR&, MatrixR& out) {
    if (h > 0) out = output_with(in, b, h - 1, [](MatrixR&) {});
  });
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.stage == "pv");
  CHECK(d.cause == "misplaced-values");
  CHECK(d.evidence.find("holds the reference of head 0") != std::string::npos);
}

TEST_CASE("hypotheses missing-keys and duplicated-keys: the last key dropped, key 7 counted twice", "[trace][hypotheses]") {
  Planted dropped(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR&, MatrixR& out) {
    out = output_with(in, b, h, [](MatrixR& p) { p.col(p.cols() - 1).setZero(); });
  });
  const Divergence d = diverged(dropped, case_of("none"));
  CHECK(d.cause == "missing-keys");
  CHECK(d.evidence.find("key 39 left out") != std::string::npos);

  Planted doubled(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR&, MatrixR& out) {
    out = output_with(in, b, h, [](MatrixR& p) { p.col(7) *= 2; });
  });
  const Divergence t = diverged(doubled, case_of("none"));
  CHECK(t.cause == "duplicated-keys");
  CHECK(t.evidence.find("key 7 counted twice") != std::string::npos);
}

TEST_CASE("hypothesis scale-mismatch: the output multiplied by the softmax scale once more", "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs& in, std::int64_t, std::int64_t, const MatrixR&, MatrixR& out) {
    out *= in.problem.scale;
  });
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.cause == "scale-mismatch");
  CHECK(d.evidence.find("(the softmax scale)") != std::string::npos);
}

TEST_CASE("hypothesis scale-mismatch: each row divided by the softmax sum of the row before it, named so",
          "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR&, MatrixR& out) {
    const HeadInputs head = head_inputs(in, b, h);
    const MatrixR s = head.scale * (head.q * head.k().transpose()) + head.bias;
    const auto sum = [&](Eigen::Index i) { return (s.row(i).array() - s.row(i).maxCoeff()).exp().sum(); };
    const MatrixR right = output_with(in, b, h, [](MatrixR&) {});
    for (Eigen::Index i = 1; i < out.rows(); ++i) out.row(i) = right.row(i) * (sum(i) / sum(i - 1));
  });
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.cause == "scale-mismatch");
  CHECK(d.evidence.find("divided by the sum of row 0") != std::string::npos);
}

TEST_CASE("no hypothesis: values nobody predicts are unknown, with the best partial explanation", "[trace][hypotheses]") {
  // Every output element of row 3 replaced by a constant no hypothesis produces.
  Planted impl(nullptr, [](const AttentionInputs&, std::int64_t, std::int64_t, const MatrixR&, MatrixR& out) {
    out.row(3).setConstant(0.3017);
  });
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.cause == "unknown");  // the same values on every run: no race either
}

TEST_CASE("hypothesis precision-loss: P.V accumulated in fp16, found by re-emulating the stage", "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs& in, std::int64_t b, std::int64_t h, const MatrixR& p, MatrixR& out) {
    const MatrixR v = head_inputs(in, b, h).v();
    for (Eigen::Index i = 0; i < p.rows(); ++i) {
      for (Eigen::Index c = 0; c < v.cols(); ++c) {
        double acc = 0;
        for (Eigen::Index j = 0; j < p.cols(); ++j) acc = round_to(DType::f16, acc + round_to(DType::f32, p(i, j)) * v(j, c));
        out(i, c) = round_to(in.problem.dtype, acc);
      }
    }
  });
  CaseSpec spec = case_of("none");
  spec.shape = {1, 2, 16, 512, 64};
  const Divergence d = diverged(impl, spec);
  CHECK(d.stage == "pv");
  CHECK(d.cause == "precision-loss");
  CHECK(d.evidence.find("accumulated in fp16") != std::string::npos);
}

TEST_CASE("overflow: an infinity no hypothesis explains, in a stage whose inputs passed, arose inside it",
          "[trace][hypotheses]") {
  Planted impl(nullptr, [](const AttentionInputs&, std::int64_t, std::int64_t, const MatrixR&, MatrixR& out) {
    out(3, 5) = std::numeric_limits<double>::infinity();
  });
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.stage == "pv");
  CHECK((d.index.row == 3 && d.index.col == 5));
  CHECK(d.cause == "overflow");
  CHECK(d.evidence.find("every earlier stage passed") != std::string::npos);
}

TEST_CASE("index-overflow: output rows whose offset passes 2^16 elements land 2^16 elements early",
          "[trace][hypotheses]") {
  // A real cpu-emulated run whose output row offset is held in 16 bits: rows 1024.. of the [.., 64]
  // output are written over rows 0.. and never in their place (still the buffer's poison).
  TracedRun traced("cpu-emulated", {1, 1, 1030, 32, 64});
  unwrite_from(traced.at(Quantity::output, -1), 1024 * 64, true);
  const Divergence d = traced.judged();
  CHECK(d.stage == "pv");
  CHECK((d.index.row == 1024 && d.index.col == 0));
  CHECK(d.cause == "index-overflow");
  CHECK(d.evidence.find("from b=0 h=0 row 1024 on, rows are not where they belong; that row's offset, 65536 elements, "
                        "is the first past 2^16") != std::string::npos);
  CHECK(d.evidence.find("the first wrong value is at b=0 h=0 row 0 col 0") != std::string::npos);
}

TEST_CASE("no index-overflow where a head boundary falls on 2^16 and nothing landed early", "[trace][hypotheses]") {
  // Only head 0 written (a grid bug): head 1 starts at 2^16 elements, but no row went anywhere.
  TracedRun traced("cpu-emulated", {1, 2, 1024, 32, 64});
  unwrite_from(traced.at(Quantity::output, -1), 1024 * 64, false);
  CHECK(traced.judged().cause == "unwritten-output");
}

TEST_CASE("hypothesis race: an output that changes from run to run on the same inputs", "[trace][hypotheses]") {
  // Row 3 takes whatever a stale buffer held: here, a value that depends on how many runs came before.
  int runs = 0;
  Planted impl(nullptr, [&runs](const AttentionInputs&, std::int64_t b, std::int64_t h, const MatrixR&, MatrixR& out) {
    if (b == 0 && h == 0) ++runs;
    out.row(3).setConstant(0.3017 + 0.125 * runs);
  });
  const Divergence d = diverged(impl, case_of("none"));
  CHECK(d.stage == "pv");
  CHECK(d.cause == "race");
  CHECK(d.evidence.find("pv is not repeatable: run 2 on the same inputs differs from run 1") != std::string::npos);
  CHECK(runs == 3);  // the trace build, the production build and one rerun: the first rerun differed
}

TEST_CASE("hypothesis rescale-error: the accumulator rescaled by the inverse of exp(m_prev - m_new)", "[trace][hypotheses]") {
  // A real run of cpu-emulated-paged whose page-1 rescale is replaced by acc * exp(m_new - m_prev).
  TracedRun traced("cpu-emulated-paged", {1, 2, 32, 200, 64});
  const Captured& acc0 = traced.at(Quantity::acc, 0);
  const Captured& max0 = traced.at(Quantity::row_max, 0);
  const Captured& max1 = traced.at(Quantity::row_max, 1);
  Captured& rescaled = traced.at(Quantity::rescaled_acc, 1);
  const std::int64_t dim = traced.spec.shape.head_dim;
  for (std::int64_t i = 0; i < rescaled.tensor.numel(); ++i) {
    const std::int64_t row = i / dim;
    rescaled.tensor.set(i, acc0.tensor.get(i) * std::exp(max1.tensor.get(row) - max0.tensor.get(row)));
  }
  const Divergence d = traced.judged();
  CHECK(d.stage == "rescale[1]");
  CHECK(d.cause == "rescale-error");
  CHECK(d.evidence.find("inverted") != std::string::npos);
}

TEST_CASE("hypothesis rescale-error on the first tile: an inverted factor is exp(+inf), and 0 times it NaN",
          "[trace][hypotheses]") {
  // A fused kernel computing r = exp(m_new - m_prev) starts from m_prev = -inf and a zero state:
  // its first running sum is 0 * inf + sum(p~) = NaN in every row that has a key.
  TracedRun traced("cpu-emulated-paged", {1, 2, 32, 200, 64});
  Captured& sum0 = traced.at(Quantity::row_sum, 0);
  for (std::int64_t i = 0; i < sum0.tensor.numel(); ++i) sum0.tensor.set(i, std::numeric_limits<double>::quiet_NaN());
  const Divergence d = traced.judged();
  CHECK(d.output == "softmax[0].sum");
  CHECK(d.cause == "rescale-error");
  CHECK(d.evidence.find("inverted") != std::string::npos);
}

}  // namespace fc

namespace fc {

TEST_CASE("hypothesis mask-mismatch: an ALiBi bias with the slope of the head before, named so", "[trace][hypotheses]") {
  Planted impl(
      [](const AttentionInputs& in, std::int64_t b, std::int64_t h, HeadInputs& head) {
        if (h > 0) head.bias = head_inputs(in, b, h - 1).bias;
      },
      nullptr);
  const Divergence d = diverged(impl, case_of("alibi"));
  CHECK(d.output == "qk");
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("the ALiBi slope of head 0") != std::string::npos);
}

TEST_CASE("hypothesis mask-mismatch: an additive bias multiplied by the softmax scale with the scores",
          "[trace][hypotheses]") {
  Planted impl(
      [](const AttentionInputs& in, std::int64_t, std::int64_t, HeadInputs& head) {
        head.bias = head.bias.unaryExpr([&](double x) { return std::isfinite(x) ? x * in.problem.scale : x; });
      },
      nullptr);
  const Divergence d = diverged(impl, case_of("bias"));
  CHECK(d.output == "qk");
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("(the softmax scale)") != std::string::npos);
}

TEST_CASE("a factor fitted on each row of a quantity with one element a row explains nothing", "[trace][hypotheses]") {
  // A running sum wrong by a different amount in every row: any such error is "each row the
  // reference times its own factor", which is no evidence of a scale bug.
  TracedRun traced("cpu-emulated-paged", {1, 2, 32, 200, 64});
  Captured& sum1 = traced.at(Quantity::row_sum, 1);
  for (std::int64_t i = 0; i < sum1.tensor.numel(); ++i) sum1.tensor.set(i, sum1.tensor.get(i) * (1.1 + 0.07 * (i % 5)));
  const Divergence d = traced.judged();
  CHECK(d.output == "softmax[1].sum");
  CHECK(d.cause != "scale-mismatch");
}

}  // namespace fc

namespace fc {

TEST_CASE("hypothesis mask-mismatch: batch 1 masked with batch 0's finite masking bias, named so", "[trace][hypotheses]") {
  Planted impl(
      [](const AttentionInputs& in, std::int64_t b, std::int64_t h, HeadInputs& head) {
        if (b == 1) head.bias = head_inputs(in, 0, h).bias;
      },
      nullptr);
  const Divergence d = diverged(impl, case_of("padding=10,30+masked-bias=-1e4"));
  CHECK(d.output == "qk");
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("the head in batch 0") != std::string::npos);
}

TEST_CASE("hypothesis rescale-error: the running sum rescaled by 2^(m_prev - m_new), an exp2 without log2(e)",
          "[trace][hypotheses]") {
  TracedRun traced("cpu-emulated-paged", {1, 2, 32, 200, 64});
  const Captured& sum0 = traced.at(Quantity::row_sum, 0);
  const Captured& max0 = traced.at(Quantity::row_max, 0);
  const Captured& max1 = traced.at(Quantity::row_max, 1);
  Captured& sum1 = traced.at(Quantity::row_sum, 1);
  for (std::int64_t i = 0; i < sum1.tensor.numel(); ++i) {
    const double delta = max0.tensor.get(i) - max1.tensor.get(i);
    sum1.tensor.set(i, sum1.tensor.get(i) + (std::exp2(delta) - std::exp(delta)) * sum0.tensor.get(i));
  }
  const Divergence d = traced.judged();
  INFO(d.evidence);
  CHECK(d.output == "softmax[1].sum");
  CHECK(d.cause == "rescale-error");
  CHECK(d.evidence.find("exp2 without the log2(e) factor") != std::string::npos);
}

TEST_CASE("fully-masked-row: an lse of +inf for a row with no key, where the convention is -inf", "[trace][hypotheses]") {
  TracedRun traced("cpu-emulated-paged", {2, 2, 32, 48, 64}, "padding=48,0");
  Captured& lse = traced.at(Quantity::lse, -1);
  const std::int64_t first_of_batch_1 = 2 * 32;
  for (std::int64_t i = first_of_batch_1; i < lse.tensor.numel(); ++i) lse.tensor.set(i, std::numeric_limits<double>::infinity());
  const Divergence d = traced.judged();
  CHECK(d.output == "normalize.lse");
  CHECK(d.cause == "fully-masked-row");
  CHECK(d.evidence.find("FlashAttention-2") != std::string::npos);
}

}  // namespace fc

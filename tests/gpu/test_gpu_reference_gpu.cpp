// The FP64 reference on the GPU (reference/gpu/) against the Eigen one: every chain (full,
// blocked, split-KV), every stage function on exact (stage-local) inputs, and a traced run's
// whole judgement, over masks, softcap, finite masking biases, fully masked rows and every
// declared arithmetic (fp16/bf16/fp32 outputs, tensor cores, an fp16 accumulator).
//
// Agreement is relative, 1e-12: each element of a value or a bound against the largest
// magnitude in its row (a score that cancels to near zero carries the rounding of its row's
// products, which cuBLAS and Eigen sum in different orders).
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>

#include "catch.h"
#include "harness/inputs.h"
#include "harness/trace/evaluate.h"
#include "harness/trace/row_sample.h"
#include "harness/trace/session.h"
#include "kernels/common/device_inputs.h"
#include "core/numeric.h"
#include "reference/attention.h"
#include "reference/gpu/gpu_evaluator.h"
#include "stages/device_memory.h"

namespace fc {
namespace {

constexpr double kAgreement = 1e-12;

// max over elements of |gpu - cpu| / (largest |cpu| of the row); non-finite elements must be
// the same (inf where they are not).
double deviation(const MatrixR& cpu, const MatrixR& gpu) {
  if (cpu.rows() != gpu.rows() || cpu.cols() != gpu.cols()) return INFINITY;
  double worst = 0;
  for (Eigen::Index r = 0; r < cpu.rows(); ++r) {
    double scale = 0;
    for (Eigen::Index c = 0; c < cpu.cols(); ++c) {
      if (std::isfinite(cpu(r, c))) scale = std::max(scale, std::fabs(cpu(r, c)));
    }
    for (Eigen::Index c = 0; c < cpu.cols(); ++c) {
      const double x = cpu(r, c), y = gpu(r, c);
      if (!std::isfinite(x) || !std::isfinite(y)) {
        const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
        if (!same) return INFINITY;
        continue;
      }
      if (x != y) worst = std::max(worst, std::fabs(x - y) / scale);
    }
  }
  return worst;
}

void check_agree(const Bounded& cpu, const Bounded& on_gpu, const HeadEvaluator& dev, const std::string& what) {
  INFO(what);
  REQUIRE(on_gpu.on_device());  // the GPU evaluator keeps what it computes on the device
  const Bounded gpu = dev.to_host(on_gpu);
  CHECK(deviation(cpu.value, gpu.value) <= kAgreement);
  CHECK(deviation(cpu.bound, gpu.bound) <= kAgreement);
  CHECK(deviation(cpu.tight, gpu.tight) <= kAgreement);
  CHECK(cpu.format == gpu.format);
}

struct Variant {
  const char* name;
  ChainArithmetic a;
};

std::vector<Variant> arithmetic_variants() {
  std::vector<Variant> v{{"fp16", nominal_arithmetic(DType::f16)},
                         {"bf16", nominal_arithmetic(DType::bf16)},
                         {"fp32", nominal_arithmetic(DType::f32)}};
  ChainArithmetic tc = nominal_arithmetic(DType::f16);
  tc.qk.tensor_cores = tc.pv.tensor_cores = true;
  tc.pv.operand = DType::f16;
  tc.softmax.out = DType::f16;
  v.push_back({"fp16 tensor cores, p rounded to fp16", tc});
  ChainArithmetic narrow = nominal_arithmetic(DType::f16);
  narrow.qk.accumulate = narrow.pv.accumulate = DType::f16;
  narrow.qk.out = DType::f16;
  narrow.pv.operand = DType::f16;
  v.push_back({"fp16 accumulators", narrow});
  return v;
}

// The head's values rounded to fp16, exact: what a stage-local reference reads from a kernel.
Bounded kernel_like(const Bounded& b) {
  return Bounded::exact(b.value.unaryExpr([](double x) { return round_to(DType::f16, x); }), DType::f16);
}

// The host evaluates `in`; the GPU `on_device`, the same head with its bias as a matrix or
// as the mask it forms on the device.
void check_head(const HeadInputs& in, const HeadInputs& on_device, const EvaluatorSource& gpu,
                const std::string& label) {
  const std::unique_ptr<HeadEvaluator> host = host_evaluator(in), dev = gpu.for_head(on_device);
  for (const Variant& v : arithmetic_variants()) {
    const std::string at = label + ", " + v.name;
    const FullReference fc = full_reference(*host, v.a), fg = full_reference(*dev, v.a);
    check_agree(fc.scores, fg.scores, *dev, at + ": full scores");
    check_agree(fc.softmax.p, fg.softmax.p, *dev, at + ": full probabilities");
    check_agree(fc.softmax.max, fg.softmax.max, *dev, at + ": full row max");
    check_agree(fc.softmax.sum, fg.softmax.sum, *dev, at + ": full row sum");
    check_agree(fc.out, fg.out, *dev, at + ": full output");
    check_agree(fc.lse, fg.lse, *dev, at + ": full lse");

    const std::int64_t keys = in.k().rows();
    // Tiles of 32 keys (a warp a row; one narrower block of P.V's 64), of 128 (two blocks),
    // and of 520 where the row is long enough (a block a row). Two whole tiles or more are
    // evaluated as one stack (whole_tiles), a narrower last one after them.
    for (const std::int64_t width : {std::int64_t{32}, std::int64_t{128}, std::int64_t{520}}) {
      if (width > keys) continue;
      const BlockedReference bc = blocked_reference(*host, 0, keys, width, v.a);
      const BlockedReference bg = blocked_reference(*dev, 0, keys, width, v.a);
      REQUIRE(bc.tiles.size() == bg.tiles.size());
      for (std::size_t j = 0; j < bc.tiles.size(); ++j) {
        const std::string tile = at + ": tiles of " + std::to_string(width) + ", tile " + std::to_string(j) + " ";
        check_agree(bc.tiles[j].scores, bg.tiles[j].scores, *dev, tile + "scores");
        check_agree(bc.tiles[j].softmax.p_tilde, bg.tiles[j].softmax.p_tilde, *dev, tile + "p~");
        check_agree(bc.tiles[j].softmax.max, bg.tiles[j].softmax.max, *dev, tile + "max");
        check_agree(bc.tiles[j].softmax.sum, bg.tiles[j].softmax.sum, *dev, tile + "sum");
        check_agree(bc.tiles[j].softmax.rescale, bg.tiles[j].softmax.rescale, *dev, tile + "rescale factor");
        check_agree(bc.tiles[j].rescaled, bg.tiles[j].rescaled, *dev, tile + "rescaled accumulator");
        check_agree(bc.tiles[j].acc, bg.tiles[j].acc, *dev, tile + "accumulator");
      }
      check_agree(bc.out, bg.out, *dev, at + ": blocked output, tiles of " + std::to_string(width));
      check_agree(bc.lse, bg.lse, *dev, at + ": blocked lse, tiles of " + std::to_string(width));
    }

    const SplitReference sc = split_reference(*host, 3, 16, v.a), sg = split_reference(*dev, 3, 16, v.a);
    for (std::size_t t = 0; t < sc.splits.size(); ++t) {
      check_agree(sc.splits[t].out, sg.splits[t].out, *dev, at + ": split " + std::to_string(t) + " output");
      check_agree(sc.splits[t].lse, sg.splits[t].lse, *dev, at + ": split " + std::to_string(t) + " lse");
    }
    check_agree(sc.out, sg.out, *dev, at + ": combined output");
    check_agree(sc.lse, sg.lse, *dev, at + ": combined lse");

    // Stage-local: each function on a kernel's exact (rounded) values.
    const Bounded scores = kernel_like(fc.scores), probs = kernel_like(fc.softmax.p);
    check_agree(host->softmax(scores, v.a.softmax).p, dev->softmax(scores, v.a.softmax).p, *dev,
                at + ": local softmax");
    check_agree(host->pv(probs, 0, keys, nullptr, v.a.pv), dev->pv(probs, 0, keys, nullptr, v.a.pv), *dev,
                at + ": local pv");
    const BlockedReference bc = blocked_reference(*host, 0, keys, 32, v.a);
    if (bc.tiles.size() >= 2) {
      const TileReference& t0 = bc.tiles[0];
      const TileReference& t1 = bc.tiles[1];
      const Bounded max0 = Bounded::exact(t0.softmax.max.value, DType::f32);
      const Bounded sum0 = Bounded::exact(t0.softmax.sum.value, DType::f32);
      const Bounded acc0 = kernel_like(t0.acc), s1 = kernel_like(t1.scores), p1 = kernel_like(t1.softmax.p_tilde);
      const Bounded max1 = Bounded::exact(t1.softmax.max.value, DType::f32);
      check_agree(host->online_softmax(s1, max0, sum0, v.a.softmax).sum,
                  dev->online_softmax(s1, max0, sum0, v.a.softmax).sum, *dev, at + ": local online softmax");
      check_agree(host->rescale(acc0, max0, max1, v.a.rescale), dev->rescale(acc0, max0, max1, v.a.rescale), *dev,
                  at + ": local rescale");
      check_agree(host->pv(p1, t1.col_begin, t1.col_end, &acc0, v.a.pv),
                  dev->pv(p1, t1.col_begin, t1.col_end, &acc0, v.a.pv), *dev, at + ": local pv with accumulator");
      check_agree(host->normalize(acc0, sum0, v.a.normalize), dev->normalize(acc0, sum0, v.a.normalize), *dev,
                  at + ": local normalize");
    }
  }
}

}  // namespace

TEST_CASE("the GPU reference computes every chain and stage function as the Eigen reference, to 1e-12",
          "[gpu][reference]") {
  const std::unique_ptr<EvaluatorSource> gpu = gpu_evaluators(256);  // heads of up to D 256
  struct Case {
    Shape shape;
    const char* mask;
    const char* dist;
  };
  const Case cases[] = {
      {{1, 2, 37, 150, 64}, "none", "normal"},
      {{2, 2, 70, 97, 128}, "causal-br", "normal"},
      {{1, 2, 48, 130, 64}, "causal", "large"},        // rows with one key; large scores
      {{2, 1, 40, 100, 64}, "padding=30,100", "normal"},  // batch 0: keys past 30 masked
      {{1, 1, 33, 90, 32}, "softcap=20", "outlier"},
      {{1, 2, 50, 120, 64}, "window=16,0", "tiny"},
      {{1, 2, 40, 80, 64}, "masked-rows", "normal"},             // rows with no key
      {{1, 2, 40, 80, 64}, "bias", "normal"},                    // additive biases with -inf
      {{2, 2, 40, 80, 64}, "bool+causal-br", "normal"},          // a boolean dense part
      {{1, 1, 40, 80, 64}, "causal+masked-bias=min", "normal"},  // finite masking bias
      // batch 0's every key biased by float32's minimum: outputs bounded by v's range
      {{2, 1, 40, 80, 64}, "padding=0,80+masked-bias=-3.4e38", "normal"},
      {{1, 2, 40, 80, 64}, "alibi", "uniform"},
      {{1, 1, 24, 700, 64}, "causal-br", "normal"},  // rows of 512 keys or more: a block a row
  };
  for (const Case& c : cases) {
    CaseSpec spec;
    spec.shape = c.shape;
    spec.mask = c.mask;
    spec.dist = c.dist;
    spec.seed = 5;
    const AttentionInputs in = generate_inputs(spec);
    for (std::int64_t bh : {std::int64_t{0}, c.shape.batch * c.shape.heads - 1}) {
      const std::int64_t b = bh / c.shape.heads, h = bh % c.shape.heads;
      std::ostringstream label;
      label << c.shape.to_string() << " " << c.mask << " " << c.dist << " b=" << b << " h=" << h;
      const HeadInputs matrix = head_inputs(in, b, h);
      check_head(matrix, matrix, *gpu, label.str());
      check_head(matrix, head_inputs(in, b, h, BiasForm::mask), *gpu, label.str() + ", bias formed on the GPU");
      // Rows spread over the head (a sample): their indices travel to the device.
      const std::vector<std::int64_t> rows = {0, 2, 3, 11, c.shape.q_len - 1};
      check_head(head_inputs(in, b, h, rows), head_inputs(in, b, h, rows, BiasForm::mask), *gpu,
                 label.str() + ", rows 0 2 3 11 and the last, bias formed on the GPU");
    }
    if (&c == &cases[0]) {  // a NaN input reaches its row's every quantity on both devices alike
      HeadInputs with_nan = head_inputs(in, 0, 0);
      with_nan.q(3, 5) = std::numeric_limits<double>::quiet_NaN();
      check_head(with_nan, with_nan, *gpu, c.shape.to_string() + " with a NaN in q row 3");
    }
  }
}

TEST_CASE("a traced run judged with the GPU reference gets the Eigen reference's references and verdicts",
          "[gpu][reference]") {
  const std::unique_ptr<EvaluatorSource> gpu = gpu_evaluators(256);  // heads of up to D 256
  std::size_t kept_on_device = 0;
  for (const char* name : {"naive", "flash-splitkv", "cublaslt-paged", "wmma-fused"}) {
    std::unique_ptr<Implementation> impl = make_implementation(name);
    REQUIRE(impl);
    CaseSpec spec;
    spec.shape = {2, 2, 100, 190, 64};
    spec.mask = "causal-br";
    spec.seed = 3;
    const AttentionInputs in = generate_inputs(spec);
    const DeviceInputs device(in, nullptr);
    for (const std::string& fault : {std::string(), impl->faults().empty() ? std::string() : impl->faults()[0]}) {
      INFO(name << " fault '" << fault << "'");
      std::unique_ptr<Implementation> run_impl = make_implementation(name);
      if (!fault.empty()) run_impl->inject(fault);
      const TraceRun run = run_traced(*run_impl, in, &device, true);
      REQUIRE(run.error.empty());
      // The same run with its copies kept on the device, as a GPU judgement makes it.
      std::unique_ptr<Implementation> again = make_implementation(name);
      if (!fault.empty()) again->inject(fault);
      const TraceRun kept = run_traced(*again, in, &device, true, true);
      REQUIRE(kept.error.empty());
      for (const Captured& c : kept.captured) {  // kept on the device, or (row blocks) on the host
        if (c.present && c.problem.empty()) CHECK(c.copied());
        kept_on_device += c.resident && c.tensor.empty() ? 1 : 0;
        // The fused kernel's captures are its trace buffers' own regions, kept; others are copies.
        if (c.resident) CHECK((c.resident.get() == c.view.data) == again->captures_stay_in_buffers());
      }
      // Whole heads, blocks of 16 rows (the captures read from a first row past 0), and a
      // sample of 16 rows a head (rows spread over the head).
      const RowSample sample = sample_rows(in.problem, run.graph, parse_rows("16"));
      struct Way {
        const char* name;
        const RowSample* sample;
        std::int64_t block_elements;
      };
      for (const Way& way : {Way{"whole heads", nullptr, kRowBlockElements}, Way{"row blocks", nullptr, 16 * 190},
                             Way{"row sample", &sample, kRowBlockElements}}) {
        INFO(way.name);
        std::vector<OutputReferences> refs_cpu, refs_gpu;
        const std::vector<OutputResult> cpu =
            evaluate_outputs(in, run, &refs_cpu, BoundChoice::tight, way.sample, way.block_elements);
        const std::vector<OutputResult> on_gpu = evaluate_outputs(in, run, &refs_gpu, BoundChoice::tight, way.sample,
                                                                  way.block_elements, std::nullopt, *gpu);
        const std::vector<OutputResult> from_device =
            evaluate_outputs(in, kept, nullptr, BoundChoice::tight, way.sample, way.block_elements, std::nullopt, *gpu);
        REQUIRE(cpu.size() == on_gpu.size());
        REQUIRE(from_device.size() == on_gpu.size());
        for (std::size_t i = 0; i < cpu.size(); ++i) {  // the copies kept on the device are judged alike
          INFO(on_gpu[i].name << " from the device copy");
          const auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
          CHECK(same(from_device[i].end_to_end.max_normalized_error, on_gpu[i].end_to_end.max_normalized_error));
          CHECK(same(from_device[i].local.max_normalized_error, on_gpu[i].local.max_normalized_error));
          CHECK(from_device[i].end_to_end.failures() == on_gpu[i].end_to_end.failures());
          CHECK(from_device[i].local.failures() == on_gpu[i].local.failures());
        }
        int compared = 0;
        for (std::size_t i = 0; i < cpu.size(); ++i) {
          INFO(cpu[i].name);
          CHECK(cpu[i].end_to_end.passed() == on_gpu[i].end_to_end.passed());
          CHECK(cpu[i].local.passed() == on_gpu[i].local.passed());
          CHECK(cpu[i].end_to_end.failures() == on_gpu[i].end_to_end.failures());
          CHECK(cpu[i].local.failures() == on_gpu[i].local.failures());
          if (i >= refs_cpu.size() || refs_cpu[i].end_to_end.empty()) continue;
          ++compared;
          const OutputReferences &c = refs_cpu[i], &g = refs_gpu[i];
          const std::pair<const HostTensor*, const HostTensor*> tensors[] = {
              {&c.end_to_end, &g.end_to_end}, {&c.end_to_end_bound, &g.end_to_end_bound},
              {&c.end_to_end_tight, &g.end_to_end_tight}, {&c.local, &g.local},
              {&c.local_bound, &g.local_bound}, {&c.local_tight, &g.local_tight}};
          for (const auto& [x, y] : tensors) {
            const Dims& d = x->dims();
            const std::int64_t cols = d.size() == 4 ? d[3] : 1;
            const Eigen::Map<const MatrixR> mx(x->data_as<double>(), x->numel() / cols, cols);
            const Eigen::Map<const MatrixR> my(y->data_as<double>(), y->numel() / cols, cols);
            CHECK(deviation(mx, my) <= kAgreement);
          }
        }
        CHECK(compared > 0);
      }
    }
  }
  CHECK(kept_on_device > 0);
}

}  // namespace fc

namespace fc {
namespace {

void check_same_report(const std::optional<ElementReport>& a, const std::optional<ElementReport>& b) {
  REQUIRE(a.has_value() == b.has_value());
  if (!a) return;
  const auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  CHECK(a->index == b->index);
  CHECK(same(a->kernel, b->kernel));
  CHECK(same(a->reference, b->reference));
  CHECK(same(a->bound, b->bound));
  CHECK(same(a->tight, b->tight));
}

}  // namespace

TEST_CASE("the GPU comparison gives compare_head's metrics and reported elements exactly", "[gpu][reference]") {
  const std::unique_ptr<EvaluatorSource> gpu = gpu_evaluators(256);  // heads of up to D 256
  HeadInputs in;  // the comparison reads none of it
  in.q = MatrixR::Zero(2, 2);
  in.set_kv(in.q, in.q);
  in.bias = MatrixR::Zero(2, 2);
  const std::unique_ptr<HeadEvaluator> host = host_evaluator(in), dev = gpu->for_head(in);
  std::srand(17);
  Bounded reference;
  reference.value = MatrixR::Random(37, 53) * 4;
  reference.bound = reference.value.cwiseAbs() * 1e-3;
  reference.bound.array() += 1e-6;
  reference.tight = reference.bound / 3;
  reference.tight(2, 2) = 2 * reference.bound(2, 2);  // a tight bound above the worst case counts as the worst case
  reference.bound(4, 1) = reference.tight(4, 1) = 0;  // a zero bound: any difference fails
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  reference.value(1, 7) = -inf;  // masked, and the kernel masks it too
  reference.value(3, 3) = nan;
  reference.value(5, 9) = -inf;  // masked, but the kernel holds a finite value
  const std::vector<std::int64_t> sample_rows = [] {
    std::vector<std::int64_t> r;
    for (std::int64_t i = 0; i < 37; ++i) r.push_back(3 * i + 1);
    return r;
  }();
  for (DType format : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    MatrixR kernel = reference.value.unaryExpr([format](double x) { return round_to(format, x); });
    kernel(1, 7) = -inf;
    kernel(5, 9) = 0.5;
    kernel(6, 0) = nan;
    kernel(7, 2) = inf;
    kernel(8, 8) = -inf;
    kernel(4, 1) += 1e-3;
    kernel(9, 10) += 2 * reference.bound(9, 10);  // over both bounds
    kernel(10, 11) += 0.5 * reference.bound(10, 11);  // over the tight bound alone
    kernel(11, 12) = round_to(format, reference.value(11, 12) * 1.5);
    const Bounded values = Bounded::exact(kernel, format);
    for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{37, 53}, {20, 40}}) {
      for (BoundChoice choice : {BoundChoice::tight, BoundChoice::worst}) {
        INFO(dtype_name(format) << " " << rows << "x" << cols);
        HeadSpot spot{1, 2, 5, false};
        spot.rows = &sample_rows;
        const Metrics h = host->compare(spot, values, reference, rows, cols, format, choice);
        const Metrics g = dev->compare(spot, dev->resident(values), dev->resident(reference), rows, cols, format, choice);
        CHECK(h.elements == g.elements);
        CHECK(h.nan_kernel == g.nan_kernel);
        CHECK(h.posinf_kernel == g.posinf_kernel);
        CHECK(h.neginf_kernel == g.neginf_kernel);
        CHECK(h.nan_reference == g.nan_reference);
        CHECK(h.inf_reference == g.inf_reference);
        CHECK(h.masked_neg_inf == g.masked_neg_inf);
        CHECK(h.max_abs_error == g.max_abs_error);
        CHECK(h.max_rel_error == g.max_rel_error);
        CHECK(h.max_normalized_error == g.max_normalized_error);
        CHECK(h.max_tight_error == g.max_tight_error);
        CHECK(h.over_bound == g.over_bound);
        CHECK(h.over_tight == g.over_tight);
        CHECK(h.max_ulp == g.max_ulp);
        CHECK(h.failures() == g.failures());
        CHECK(h.failures() > 0);
        check_same_report(h.first_failure, g.first_failure);
        check_same_report(h.first_worst_case_failure, g.first_worst_case_failure);
        check_same_report(h.worst, g.worst);
      }
    }
  }
}

}  // namespace fc

namespace fc {

// The GPU evaluates a run of tiles that lie one after another (a stack, reference/gpu/
// tile_stack.h) in one go: each tile's result must be what the single call on that tile gives.
TEST_CASE("stage functions and comparisons over a stack of tiles give each tile's own", "[gpu][reference]") {
  const std::unique_ptr<EvaluatorSource> gpu = gpu_evaluators(256);  // heads of up to D 256
  CaseSpec spec;
  spec.shape = {1, 1, 45, 64 * 6 + 20, 64};
  spec.mask = "causal-br";
  spec.seed = 9;
  const AttentionInputs in = generate_inputs(spec);
  const HeadInputs head = head_inputs(in, 0, 0, BiasForm::mask);
  const std::unique_ptr<HeadEvaluator> dev = gpu->for_head(head);
  for (const Variant& v : arithmetic_variants()) {
    INFO(v.name);
    const BlockedReference chain = blocked_reference(*dev, 0, head.k().rows(), 64, v.a);
    REQUIRE(chain.tiles.size() == 7);  // six whole tiles as one stack, a narrower last one
    // Captures of the tiles' scores and p~ as a kernel would store them, stacked on the way in.
    std::vector<CapturedTensor> scores, p_tilde;
    std::vector<HostTensor> stored;
    stored.reserve(12);
    for (std::size_t t = 0; t < 6; ++t) {
      for (const Bounded* b : {&chain.tiles[t].scores, &chain.tiles[t].softmax.p_tilde}) {
        const MatrixR m = dev->to_host(*b).value;
        HostTensor x(DType::f16, {1, 1, m.rows(), m.cols()});
        for (Eigen::Index i = 0; i < m.size(); ++i) x.set(i, m.data()[i]);
        stored.push_back(std::move(x));
        (b == &chain.tiles[t].scores ? scores : p_tilde).push_back(CapturedTensor::on_host(stored.back()));
      }
    }
    const std::vector<Bounded> s = dev->captured_each(scores, 0, 0, nullptr, 1.0, DType::f16);
    const std::vector<Bounded> p = dev->captured_each(p_tilde, 0, 0, nullptr, 1.0, DType::f16);
    std::vector<HeadEvaluator::OnlineSoftmaxItem> softmax_items;
    std::vector<HeadEvaluator::RescaleItem> rescale_items;
    std::vector<HeadEvaluator::PvItem> pv_items;
    for (std::size_t t = 1; t < 6; ++t) {
      const TileReference &prev = chain.tiles[t - 1], &tile = chain.tiles[t];
      softmax_items.push_back({&s[t], &prev.softmax.max, &prev.softmax.sum});
      rescale_items.push_back({&prev.acc, &prev.softmax.max, &tile.softmax.max});
      pv_items.push_back({&p[t], tile.col_begin, tile.col_end, &tile.rescaled});
    }
    const std::vector<OnlineSoftmaxResult> softmaxes = dev->online_softmax_each(softmax_items, v.a.softmax);
    const std::vector<Bounded> rescaled = dev->rescale_each(rescale_items, v.a.rescale);
    const std::vector<Bounded> accs = dev->pv_each(pv_items, v.a.pv);
    std::vector<HeadEvaluator::CompareItem> compare_items;
    for (std::size_t i = 0; i < softmax_items.size(); ++i) {
      const std::string at = "tile " + std::to_string(i + 1);
      const auto& o = softmax_items[i];
      const OnlineSoftmaxResult one = dev->online_softmax(*o.scores, *o.prev_max, *o.prev_sum, v.a.softmax);
      check_agree(dev->to_host(one.p_tilde), softmaxes[i].p_tilde, *dev, at + " p~");
      check_agree(dev->to_host(one.sum), softmaxes[i].sum, *dev, at + " sum");
      const auto& r = rescale_items[i];
      check_agree(dev->to_host(dev->rescale(*r.acc, *r.prev_max, *r.new_max, v.a.rescale)), rescaled[i], *dev,
                  at + " rescale");
      const auto& x = pv_items[i];
      check_agree(dev->to_host(dev->pv(*x.p, x.key_begin, x.key_end, x.acc, v.a.pv)), accs[i], *dev, at + " pv");
      HeadSpot spot{0, 0, x.key_begin, false};
      compare_items.push_back({spot, &p[i + 1], &softmaxes[i].p_tilde, 45, 64, DType::f16});
    }
    // Stacked kernels against stacked references: one comparison of the run, one read-back.
    const std::vector<Metrics> batched = dev->compare_each(compare_items, BoundChoice::tight);
    for (std::size_t i = 0; i < compare_items.size(); ++i) {
      const auto& c = compare_items[i];
      const Metrics one = dev->compare(c.spot, *c.kernel, *c.reference, c.rows, c.cols, c.kernel_format,
                                       BoundChoice::tight);
      CHECK(one.elements == batched[i].elements);
      CHECK(one.max_normalized_error == batched[i].max_normalized_error);
      CHECK(one.max_abs_error == batched[i].max_abs_error);
      CHECK(one.over_tight == batched[i].over_tight);
      check_same_report(one.worst, batched[i].worst);
      CHECK(batched[i].elements == 45 * 64);
    }
  }
}

}  // namespace fc

namespace fc {

// A sample's rows spread over a head are widened in one launch a stack: each tensor's rows
// must be what the host widens, in every format, for rows all, consecutive and spread, from the
// device and from the host.
TEST_CASE("captures widened on the GPU for spread rows equal the host's widening", "[gpu][reference]") {
  const std::unique_ptr<EvaluatorSource> gpu = gpu_evaluators(256);  // heads of up to D 256
  CaseSpec spec;
  spec.shape = {1, 2, 40, 24, 16};
  const AttentionInputs in = generate_inputs(spec);
  const HeadInputs head = head_inputs(in, 0, 1, BiasForm::mask);
  const std::unique_ptr<HeadEvaluator> dev = gpu->for_head(head);
  const std::unique_ptr<HeadEvaluator> host = host_evaluator(head);
  const std::vector<std::int64_t> spread{0, 3, 4, 5, 17, 39}, consecutive{7, 8, 9, 10};
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    INFO(dtype_name(t));
    std::vector<HostTensor> stored;
    std::vector<DeviceMemory> copies;
    for (int i = 0; i < 3; ++i) {
      HostTensor x(t, {1, 2, 40, 24});
      for (std::int64_t e = 0; e < x.numel(); ++e) x.set(e, 0.25 * static_cast<double>((e * 37 + i * 11) % 97) - 12);
      DeviceMemory d(x.nbytes());
      FC_CUDA(cudaMemcpy(d.get(), x.data(), x.nbytes(), cudaMemcpyHostToDevice));
      stored.push_back(std::move(x));
      copies.push_back(std::move(d));
    }
    for (std::size_t n : {std::size_t{1}, std::size_t{3}}) {
      std::vector<CapturedTensor> on_device, on_host;
      for (std::size_t i = 0; i < n; ++i) {
        on_device.push_back({nullptr, copies[i].get(), t, stored[i].dims()});
        on_host.push_back(CapturedTensor::on_host(stored[i]));
      }
      for (const std::vector<std::int64_t>* rows : {static_cast<const std::vector<std::int64_t>*>(nullptr), &consecutive,
                                                     &spread}) {
        INFO(n << " tensors, " << (rows ? rows->size() : 40) << " rows");
        const std::vector<Bounded> want = host->captured_each(on_host, 0, 1, rows, 2.0, t);
        for (const auto* tensors : {&on_device, &on_host}) {
          const std::vector<Bounded> got = dev->captured_each(*tensors, 0, 1, rows, 2.0, t);
          REQUIRE(got.size() == n);
          for (std::size_t i = 0; i < n; ++i) CHECK(dev->to_host(got[i]).value == want[i].value);
        }
      }
    }
  }
}

}  // namespace fc

// The attention people run: GQA, any head dim, windows, softcap, ALiBi, finite masking
// biases, varlen, paged KV, lse. Each from its spec through the reference, the bounds, the
// readers and the CPU implementations.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>

#include "catch.h"
#include "core/error.h"
#include "core/packed.h"
#include "harness/inputs.h"
#include "harness/io/case_file.h"
#include "harness/io/npz.h"
#include "harness/io/sdpa_report.h"
#include "harness/trace/capture.h"
#include "harness/trace/judge.h"
#include "harness/triage/input_findings.h"
#include "kernels/implementation.h"
#include "reference/attention.h"
#include "stages/workspace.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

CaseSpec spec_of(Shape shape, const std::string& mask, DType dtype = DType::f16, std::uint64_t seed = 5) {
  CaseSpec c;
  c.shape = shape;
  c.mask = mask;
  c.dtype = dtype;
  c.seed = seed;
  return c;
}

// Every CPU implementation on the case: each passes.
void check_cpu_implementations_pass(const CaseSpec& spec) {
  const AttentionInputs in = generate_inputs(spec);
  for (const std::string name : {"cpu-emulated", "cpu-emulated-paged"}) {
    std::unique_ptr<Implementation> impl = make_implementation(name);
    const CaseResult r = judge_case(*impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), nullptr);
    INFO(name << " on " << spec.label() << ": "
              << (r.divergence ? r.divergence->output + " " + r.divergence->evidence : r.reason));
    CHECK(r.verdict == Verdict::pass);
    CHECK(r.outputs.size() >= 3);  // scores, probabilities and the output at least
    for (const OutputResult& o : r.outputs) {
      CHECK(o.compared);
      CHECK(std::isfinite(o.end_to_end.max_normalized_error));
    }
  }
}

// Every bound of every quantity of the three chains is a number (no NaN) and finite.
void check_bounds_finite(const AttentionInputs& in) {
  const Shape& s = in.problem.shape;
  const ChainArithmetic a = nominal_arithmetic(in.problem.dtype);
  auto finite = [](const Bounded& x, const char* what) {
    INFO(what);
    CHECK(x.bound.allFinite());
  };
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const HeadInputs head = head_inputs(in, b, h);
      const FullReference full = full_reference(head, a);
      finite(full.scores, "scores");
      finite(full.softmax.p, "p");
      finite(full.softmax.sum, "sum");
      finite(full.out, "out");
      finite(full.lse, "lse");
      const BlockedReference blocked = blocked_reference(head, 0, s.kv_len, 32, a);
      for (const TileReference& t : blocked.tiles) {
        finite(t.softmax.p_tilde, "p~");
        finite(t.softmax.sum, "running sum");
        finite(t.softmax.rescale, "rescale factor");
        finite(t.rescaled, "rescaled");
        finite(t.acc, "acc");
      }
      finite(blocked.out, "blocked out");
      finite(blocked.lse, "blocked lse");
      const SplitReference split = split_reference(head, 3, 32, a);
      finite(split.out, "combined");
      finite(split.lse, "combined lse");
    }
}

std::string temp_path(const std::string& name) { return "/tmp/fc_test_features_" + name; }

}  // namespace

TEST_CASE("GQA shapes parse as Hq:Hkv and query head h reads K/V head h / group", "[features]") {
  const Shape s = parse_shape("2,8:2,100,300,128");
  CHECK(s.heads == 8);
  CHECK(s.kv_head_count() == 2);
  CHECK(s.group() == 4);
  CHECK(s.to_string() == "B2 H8:2 Sq100 Sk300 D128");
  CHECK_THROWS_AS(parse_shape("2,8:3,100,64"), Error);
  CHECK_THROWS_AS(parse_shape("2,8:,100,64"), Error);
  const AttentionInputs in = generate_inputs(spec_of({1, 6, 8, 9, 16, 2}, "none"));
  CHECK(in.k.dims() == Dims{1, 2, 9, 16});
  for (std::int64_t h = 0; h < 6; ++h) {
    const HeadInputs head = head_inputs(in, 0, h);
    CHECK(head.k() == head_matrix(in.k, 0, h / 3));
    CHECK(head.v() == head_matrix(in.v, 0, h / 3));
  }
}

TEST_CASE("windows, ALiBi and variable lengths follow FlashAttention's alignment", "[features]") {
  Problem p;
  p.shape = {2, 2, 4, 10, 8};
  p.scale = 1;
  p.mask.window = {2, 1};  // keys i + 6 - 2 .. i + 6 + 1, bottom-right aligned (Sk - Sq = 6)
  for (std::int64_t j = 0; j < 10; ++j) {
    CHECK((mask_bias(p, 0, 0, 1, j) == 0) == (j >= 5 && j <= 8));
  }
  p.mask.window = {};
  p.mask.alibi_slopes = {0.5, 0.25};
  CHECK(mask_bias(p, 0, 1, 0, 0) == -0.25 * 6);  // -slope |i - j + Sk - Sq|
  CHECK(mask_bias(p, 0, 0, 3, 9) == 0);
  p.layout.q_lens = {2, 0};
  p.layout.kv_lens = {3, 10};
  CHECK(mask_bias(p, 0, 0, 2, 0) == -kInf);  // row 2 of sequence 0 does not exist
  CHECK(mask_bias(p, 0, 0, 0, 3) == -kInf);  // nor key 3
  CHECK(mask_bias(p, 0, 0, 1, 2) == 0);      // the sequence's own diagonal: 3 - 2 = 1
  CHECK(mask_bias(p, 0, 0, 0, 0) == -0.5);
  p.mask.causal = Causal::bottom_right;
  CHECK(mask_bias(p, 0, 0, 0, 2) == -kInf);
  CHECK(mask_bias(p, 0, 0, 0, 1) == 0);
}

TEST_CASE("mask specs build windows, softcaps, ALiBi, finite biases, varlen and paged layouts", "[features]") {
  const Shape s{3, 4, 20, 50, 32, 2};
  const MaskSpec m = parse_mask_spec("causal-br+window=8,0+alibi+softcap=30+varlen+paged=16", s, DType::f16, 7);
  CHECK(m.mask.window == Window{8, 0});
  CHECK(m.mask.alibi_slopes == standard_alibi_slopes(4));
  CHECK(m.softcap == 30);
  CHECK(m.layout.q_lens.size() == 3);
  CHECK(m.layout.block_size == 16);
  CHECK(m.layout.max_blocks == 4);
  CHECK(static_cast<std::int64_t>(m.layout.block_table.size()) == 3 * 4);
  const MaskSpec hf = parse_mask_spec("causal+masked-bias=min", s, DType::f16, 1);
  CHECK(hf.mask.causal == Causal::none);
  REQUIRE(hf.mask.dense_is_bias());
  CHECK(hf.mask.dense.get(1) == -65504);  // row 0, key 1: masked, as finfo(float16).min
  CHECK(hf.mask.dense.get(0) == 0);
  CHECK(parse_mask_spec("varlen=3:0,0:5,20:50", s, DType::f16, 1).layout.kv_lens == std::vector<std::int32_t>{0, 5, 50});
  for (const char* bad : {"window=-2,0", "window=3", "softcap=0", "softcap=-1", "varlen=1:2", "varlen=30:5,1:1,1:1",
                          "paged=0", "masked-bias=5", "alibi=x"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_mask_spec(bad, s, DType::f16, 1), Error);
  }
  CHECK(standard_alibi_slopes(8).front() == 0.5);
  CHECK(standard_alibi_slopes(8).back() == std::pow(2.0, -8));
}

TEST_CASE("the reference soft-caps before the mask, and its bound covers an fp32 tanh", "[features]") {
  const AttentionInputs in = generate_inputs(spec_of({1, 2, 16, 24, 32}, "causal+softcap=5"));
  const HeadInputs head = head_inputs(in, 0, 1);
  const Bounded s = eval_qk(head, 0, 24, nominal_arithmetic(DType::f16).qk);
  for (Eigen::Index i = 0; i < 16; ++i)
    for (Eigen::Index j = 0; j < 24; ++j) {
      if (j > i) {
        CHECK(s.value(i, j) == -kInf);
        continue;
      }
      const double t = head.scale * head.q.row(i).dot(head.k().row(j));
      CHECK(s.value(i, j) == Approx(5 * std::tanh(t / 5)).epsilon(1e-12));
      CHECK(std::fabs(s.value(i, j)) <= 5);
      const float fp32 = 5.0f * std::tanh(static_cast<float>(t) * 0.2f);
      CHECK(std::fabs(fp32 - s.value(i, j)) <= s.bound(i, j));
    }
}

TEST_CASE("Hugging Face masks (finfo.min, -65504, -1e4) keep every bound finite and the CPU implementations pass",
          "[features]") {
  // The case of the report: B1 H1 S600 D4 fp16, a sliding window built as an additive finfo.min mask.
  const CaseSpec report = spec_of({1, 1, 600, 600, 4}, "causal+window=63,0+masked-bias=min");
  check_bounds_finite(generate_inputs(report));
  check_cpu_implementations_pass(report);
  for (const std::string bias : {"-3.4028234663852886e38", "-65504", "-1e4"}) {
    // Rows whose every key is masked (padding=0) and rows masked in part.
    for (const DType dtype : {DType::f16, DType::bf16}) {
      const CaseSpec spec = spec_of({2, 2, 40, 70, 64}, "causal+padding=0,70+masked-bias=" + bias, dtype);
      INFO(spec.label());
      check_bounds_finite(generate_inputs(spec));
      check_cpu_implementations_pass(spec);
    }
  }
}

TEST_CASE("a row masked by a finite bias is an input finding: its output is the uniform average of V, not 0",
          "[features]") {
  const AttentionInputs in = generate_inputs(spec_of({2, 1, 8, 16, 32}, "padding=0,16+masked-bias=-3.4e38"));
  const std::vector<InputFinding> findings = find_input_problems(in, DType::f16);
  const auto finding = std::find_if(findings.begin(), findings.end(),
                                    [](const InputFinding& f) { return f.cause == "finite-bias-masked-rows"; });
  REQUIRE(finding != findings.end());
  CHECK(finding->detail.rfind("8 query rows are masked by a finite bias", 0) == 0);
  CHECK(finding->detail.find("uniform average of V, not 0") != std::string::npos);
  CHECK(finding->index == Index4{0, 0, 0, -1});
  const ReferenceTensors ref = compute_reference(in, {});
  const MatrixR v = head_matrix(in.v, 0, 0);
  for (Eigen::Index c = 0; c < 32; ++c) CHECK(ref.output.get(c) == Approx(v.col(c).mean()).margin(1e-12));
  CHECK(ref.masked_rows.empty());  // masked by the author's intent, not by -inf

  // The same rows masked by -inf: no such finding.
  const AttentionInputs plain = generate_inputs(spec_of({2, 1, 8, 16, 32}, "padding=0,16"));
  for (const InputFinding& f : find_input_problems(plain, DType::f16)) CHECK(f.cause != "finite-bias-masked-rows");
}

TEST_CASE("rows whose lse is beyond +-88.7 are an input finding", "[features]") {
  AttentionInputs in = generate_inputs(spec_of({1, 1, 4, 8, 16}, "none"));
  in.problem.scale = 100;  // lse near the largest score, in the hundreds
  const std::vector<InputFinding> findings = find_input_problems(in, DType::f16);
  CHECK(std::any_of(findings.begin(), findings.end(), [](const InputFinding& f) { return f.cause == "lse-out-of-range"; }));
  const AttentionInputs normal = generate_inputs(spec_of({1, 1, 4, 8, 16}, "none"));
  for (const InputFinding& f : find_input_problems(normal, DType::f16)) CHECK(f.cause != "lse-out-of-range");
}

TEST_CASE("any head dim, GQA, windows, softcap, ALiBi, varlen and paged KV pass through the CPU implementations",
          "[features]") {
  const std::vector<CaseSpec> cases = {
      spec_of({2, 4, 30, 50, 1, 1}, "causal-br+alibi"),
      spec_of({1, 6, 33, 70, 59, 2}, "window=10,3+softcap=20", DType::bf16),
      spec_of({3, 2, 40, 90, 80}, "causal-br+varlen+paged=16"),
      spec_of({3, 4, 40, 90, 40, 2}, "varlen=0:10,40:0,17:90+window=20,-1+paged=32"),
      spec_of({2, 2, 50, 130, 111}, "bool+masked-rows+softcap=7+alibi+varlen", DType::bf16),
  };
  for (const CaseSpec& spec : cases) check_cpu_implementations_pass(spec);
}

TEST_CASE("varlen: rows and keys past a sequence's lengths are never compared nor counted as unwritten",
          "[features]") {
  const AttentionInputs in = generate_inputs(spec_of({2, 1, 6, 9, 8}, "varlen=2:3,6:9"));
  const Problem& p = in.problem;
  StageGraph g;
  g.algorithm.kind = Algorithm::Kind::full;
  g.arithmetic = nominal_arithmetic(p.dtype);
  g.stages = {{StageKind::pv, -1, -1, {{"", Quantity::output, DType::f32}}}};
  Workspace ws(false);
  Buffer& out = ws.allocate("output", DType::f32, 2 * 6 * 8);
  ws.poison(nullptr);  // every element unwritten
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t c = 0; c < 8; ++c) {
      if (r < 2) out.as<float>()[r * 8 + c] = 0;  // sequence 0: its two rows
      out.as<float>()[(6 + r) * 8 + c] = 0;       // sequence 1: all of its rows
    }
  CaptureTap tap(g, p, true, nullptr);
  tap.capture(0, 0, out.view({2, 1, 6, 8}));
  tap.finish();
  CHECK(tap.results()[0].flags.unwritten == 0);
  out.as<float>()[1 * 8 + 3] = std::nanf("");
  tap.reset();
  tap.capture(0, 0, out.view({2, 1, 6, 8}));
  tap.finish();
  CHECK(tap.results()[0].flags.nan == 1);
  CHECK(tap.results()[0].flags.first_nan == 1 * 8 + 3);
  CHECK(existing_extent(p, g.algorithm, g.stages[0], g.stages[0].outputs[0], 0).rows == 2);
  CHECK(existing_extent(p, g.algorithm, g.stages[0], g.stages[0].outputs[0], 1).rows == 6);
}

TEST_CASE("the packed and paged layouts hold each sequence's rows where cu_seqlens and the block table say",
          "[features]") {
  const AttentionInputs in = generate_inputs(spec_of({3, 2, 12, 40, 8, 1}, "varlen=5:40,0:3,12:17+paged=16"));
  const PackedInputs packed = pack_inputs(in);
  CHECK(packed.cu_seqlens_q == std::vector<std::int32_t>{0, 5, 5, 17});
  CHECK(packed.cu_seqlens_k == std::vector<std::int32_t>{0, 40, 43, 60});
  const Layout& l = in.problem.layout;
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t j = 0; j < in.problem.kv_len_of(b); ++j)
      for (std::int64_t d = 0; d < 8; ++d) {
        const double logical = in.k.get((b * 40 + j) * 8 + d);
        CHECK(packed.k.get((packed.cu_seqlens_k[static_cast<std::size_t>(b)] + j) * 8 + d) == logical);
        CHECK(packed.k_cache.get(paged_row(l, l.max_blocks, b, j) * 8 + d) == logical);
      }
  CHECK(packed.q.get((5 + 3) * 2 * 8 + 8 + 1) == in.q.get(((2 * 2 + 1) * 12 + 3) * 8 + 1));  // b 2, h 1, row 3
}

TEST_CASE("SDPA reports carry GQA, packed varlen, a paged cache, window, softcap and ALiBi", "[features][report]") {
  const std::string path = temp_path("report.npz");
  // The logical case, written as FlashAttention's varlen and paged forms.
  const AttentionInputs in = generate_inputs(spec_of({3, 4, 12, 40, 16, 2}, "varlen=5:40,0:3,12:17+paged=16"));
  const PackedInputs packed = pack_inputs(in);
  auto int32s = [](const std::vector<std::int32_t>& v, Dims dims) {
    HostTensor t(DType::i32, std::move(dims));
    for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
    return t;
  };
  auto first_rows = [](const HostTensor& t, std::int64_t rows) {
    HostTensor out(t.dtype(), {rows, t.dim(1), t.dim(2)});
    std::memcpy(out.data(), t.data(), out.nbytes());
    return out;
  };
  HostTensor window(DType::i32, {2}), softcap(DType::f64, {}), slopes(DType::f32, {4});
  window.set(0, 7);
  window.set(1, -1);
  softcap.set(0, 30);
  for (std::int64_t h = 0; h < 4; ++h) slopes.set(h, 0.125 * (h + 1));
  const Layout& l = in.problem.layout;
  std::map<std::string, HostTensor> arrays{
      {"q", first_rows(packed.q, 17)},
      {"k", packed.k_cache},
      {"v", packed.v_cache},
      {"cu_seqlens_q", int32s(packed.cu_seqlens_q, {4})},
      {"block_table", int32s(l.block_table, {3, l.max_blocks})},
      {"seqused_k", int32s(l.kv_lens, {3})},
      {"window_size", window},
      {"softcap", softcap},
      {"alibi_slopes", slopes}};
  write_npz(path, arrays);
  const AttentionInputs back = read_sdpa_report(path);
  CHECK(back.problem.shape == Shape{3, 4, 12, 40, 16, 2});
  CHECK(back.problem.layout.q_lens == l.q_lens);
  CHECK(back.problem.layout.kv_lens == l.kv_lens);
  CHECK(back.problem.layout.block_table == l.block_table);
  CHECK(back.problem.mask.window == Window{7, -1});
  CHECK(back.problem.softcap == 30);
  CHECK(back.problem.mask.alibi_slopes[3] == 0.5);
  CHECK(std::memcmp(back.q.data(), in.q.data(), in.q.nbytes()) == 0);
  CHECK(std::memcmp(back.k.data(), in.k.data(), in.k.nbytes()) == 0);
  CHECK(std::memcmp(back.v.data(), in.v.data(), in.v.nbytes()) == 0);

  // Packed k and v with cu_seqlens_k instead of the cache.
  arrays["k"] = first_rows(packed.k, 60);
  arrays["v"] = first_rows(packed.v, 60);
  arrays.erase("block_table");
  arrays.erase("seqused_k");
  arrays["cu_seqlens_k"] = int32s(packed.cu_seqlens_k, {4});
  write_npz(path, arrays);
  const AttentionInputs varlen = read_sdpa_report(path);
  CHECK_FALSE(varlen.problem.layout.paged());
  CHECK(std::memcmp(varlen.k.data(), in.k.data(), in.k.nbytes()) == 0);
  std::remove(path.c_str());
}

TEST_CASE("bad GQA, varlen, paged, window and softcap reports are one line naming the file", "[features][report]") {
  const std::string path = temp_path("bad.npz");
  const AttentionInputs in = generate_inputs(spec_of({2, 6, 5, 7, 16, 3}, "none"));
  auto error_of = [&](std::map<std::string, HostTensor> arrays) {
    write_npz(path, arrays);
    try {
      read_sdpa_report(path);
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK(m.rfind(path + ": ", 0) == 0);
      CHECK(m.find('\n') == std::string::npos);
      return m;
    }
    FAIL("no error");
    return std::string();
  };
  auto int32s = [](std::vector<std::int32_t> v) {
    HostTensor t(DType::i32, {static_cast<std::int64_t>(v.size())});
    for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
    return t;
  };
  std::map<std::string, HostTensor> base{{"q", in.q}, {"k", in.k}, {"v", in.v}};
  auto with = [&](const std::string& name, HostTensor t) {
    auto a = base;
    a[name] = std::move(t);
    return a;
  };
  HostTensor k4(DType::f16, {2, 4, 7, 16});
  auto gqa = base;
  gqa["k"] = k4;
  gqa["v"] = k4;
  CHECK(error_of(gqa).find("multiple of K/V heads") != std::string::npos);

  auto varlen = base;
  varlen["q"] = HostTensor(DType::f16, {10, 6, 16});
  varlen["cu_seqlens_q"] = int32s({0, 6, 4});
  CHECK(error_of(varlen).find("not increasing") != std::string::npos);
  varlen["cu_seqlens_q"] = int32s({0, 4, 9});
  CHECK(error_of(varlen).find("ends at 9") != std::string::npos);

  auto paged = base;
  paged["k"] = HostTensor(DType::f16, {4, 16, 3, 16});
  paged["v"] = HostTensor(DType::f16, {4, 16, 3, 16});
  HostTensor table(DType::i32, {2, 1});
  table.set(0, 1);
  table.set(1, 4);
  paged["block_table"] = table;
  paged["seqused_k"] = int32s({3, 5});
  CHECK(error_of(paged).find("block_table[1][0] = 4 is outside [0, 4)") != std::string::npos);

  HostTensor window(DType::i32, {2});
  window.set(0, -2);
  CHECK(error_of(with("window_size", window)).find("-1 for unbounded") != std::string::npos);
  HostTensor cap(DType::f32, {});
  CHECK(error_of(with("softcap", cap)).find("'softcap' must be positive") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("HDF5 case files keep GQA, softcap, window, ALiBi, varlen and the block table", "[features][hdf5]") {
  const AttentionInputs in =
      generate_inputs(spec_of({2, 4, 9, 33, 16, 2}, "causal-br+window=5,0+alibi+softcap=12+varlen+paged=8", DType::bf16));
  const std::string path = temp_path("case.h5");
  {
    H5Writer out(path);
    CaseDescription d;
    d.label = "features";
    write_header(out, "snapshot", "test", d, in);
    write_inputs(out, in);
    out.commit();
  }
  const CaseFile f = read_case_file(H5Reader(path));
  const Problem& p = f.inputs.problem;
  CHECK(p.shape == in.problem.shape);
  CHECK(p.softcap == 12);
  CHECK(p.mask.window == Window{5, 0});
  CHECK(p.mask.alibi_slopes == in.problem.mask.alibi_slopes);
  CHECK(p.layout.q_lens == in.problem.layout.q_lens);
  CHECK(p.layout.kv_lens == in.problem.layout.kv_lens);
  CHECK(p.layout.block_table == in.problem.layout.block_table);
  CHECK(p.layout.block_size == 8);
  CHECK(p.layout.num_blocks == in.problem.layout.num_blocks);
  std::remove(path.c_str());
}

TEST_CASE("a case file whose mask datasets disagree with its mask record is refused", "[features][hdf5]") {
  const std::string path = temp_path("lost.h5");
  // A case file of `in` whose /meta mask says `recorded`.
  auto write_case = [&](const AttentionInputs& in, const std::string& recorded) {
    H5Writer out(path);
    CaseDescription d;
    d.label = "mask record";
    d.mask = recorded;
    write_header(out, "snapshot", "test", d, in);
    write_inputs(out, in);
    out.commit();
  };
  // /meta says padding, but no /inputs/key_lengths: as a file that lost the dataset, which
  // otherwise reads as an unpadded mask and replays as a mask mismatch.
  const AttentionInputs in = generate_inputs(spec_of({2, 2, 9, 17, 16}, "causal-br", DType::f16));
  write_case(in, "causal-br+padding=3,17");
  std::string error;
  try {
    read_case_file(H5Reader(path));
  } catch (const Error& e) {
    error = e.what();
  }
  CHECK(error.find("/meta mask 'causal-br+padding=3,17' but the file's mask attributes and datasets give "
                   "'causal-br'") != std::string::npos);
  write_case(in, "causal-br");
  CHECK(read_case_file(H5Reader(path)).description.mask == "causal-br");
  // masked-bias=V folds causal and padding into one finite bias: the record names parts the
  // dense mask carries, and the file reads back.
  const std::string folded = "causal+padding=0,17+masked-bias=min";
  write_case(generate_inputs(spec_of({2, 2, 9, 17, 16}, folded, DType::f16)), folded);
  CHECK(read_case_file(H5Reader(path)).description.mask == folded);
  std::remove(path.c_str());
}

}  // namespace fc

namespace fc {

TEST_CASE("wgmma-fused declines, in one line each, what its TMA kernel does not build", "[features]") {
  const std::unique_ptr<Implementation> impl = make_implementation("wgmma-fused");
  REQUIRE(impl);
  const auto why = [&](Shape shape, const std::string& mask, DType dtype = DType::f16) {
    return impl->unsupported(make_problem(spec_of(shape, mask, dtype)));
  };
  // Not an sm_90a build, or a device of another architecture: one line for everything.
  if (const auto elsewhere = why({1, 2, 64, 64, 64}, "none"); elsewhere && elsewhere->find("sm_90a") != std::string::npos) {
    CHECK(elsewhere->find("wmma-fused") != std::string::npos);
    return;
  }
  // What it builds: D 64 and 128, fp16 and bf16, GQA, causal, window, softcap, padding, bias.
  CHECK_FALSE(why({2, 8, 200, 300, 64, 2}, "causal-br"));
  CHECK_FALSE(why({1, 2, 260, 260, 128}, "window=70,30+softcap=20", DType::bf16));
  CHECK_FALSE(why({1, 2, 150, 270, 64}, "padding+bias"));
  CHECK_FALSE(why({3, 4, 200, 300, 64, 2}, "varlen=130:170,0:40,200:300+causal-br"));  // packed, through TMA too
  CHECK_FALSE(why({2, 2, 150, 333, 128}, "paged=16+window=64,0"));                       // a box a block
  CHECK_FALSE(why({3, 2, 200, 300, 64}, "varlen=17:290,200:0,64:64+paged=32+causal-br"));
  const std::map<std::string, std::optional<std::string>> declined = {
      {"head dim 96", why({1, 2, 150, 270, 96}, "none")},
      {"ALiBi", why({1, 4, 150, 230, 64}, "alibi")},
      {"paged KV in blocks of 4 keys", why({2, 2, 150, 333, 128}, "paged=4")},
  };
  for (const auto& [what, line] : declined) {
    INFO(what);
    REQUIRE(line);
    CHECK(line->find('\n') == std::string::npos);
    CHECK_FALSE(line->empty());
  }
  CHECK(declined.at("head dim 96")->find("96") != std::string::npos);
  CHECK(declined.at("paged KV in blocks of 4 keys")->find("wmma-fused") != std::string::npos);  // where to go instead
}

}  // namespace fc

// `check`: captured outputs judged as an implementation, the arithmetic they declare, and
// the files they come in: good captures pass, planted errors are found where they are, bad
// files are one line and exit 2.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "catch.h"
#include "core/resource_usage.h"
#include "harness/check/captured.h"
#include "harness/inputs.h"
#include "harness/io/capture_file.h"
#include "harness/io/case_loader.h"
#include "harness/io/case_file.h"
#include "harness/io/npz.h"
#include "harness/trace/judge.h"
#include "kernels/implementation.h"
#include "reference/attention.h"
#include "stages/flags.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

AttentionInputs inputs_of(Shape shape, const std::string& mask, DType dtype = DType::f16, std::uint64_t seed = 3) {
  CaseSpec spec;
  spec.shape = shape;
  spec.mask = mask;
  spec.dtype = dtype;
  spec.seed = seed;
  return generate_inputs(spec);
}

// What a faithful kernel stores: the FP64 reference rounded to the formats it keeps.
std::map<std::string, HostTensor> faithful(const AttentionInputs& in) {
  const ReferenceTensors r = compute_reference(in, {});
  return {{"out", r.output.to(in.problem.dtype)}, {"lse", r.lse.to(DType::f32)},
          {"scores", r.scores.to(DType::f32)},    {"probs", r.probs.to(DType::f32)},
          {"row_max", r.row_max.to(DType::f32)},  {"row_sum", r.row_sum.to(DType::f32)}};
}

CaptureFile capture_of(const AttentionInputs& in, std::map<std::string, HostTensor> outputs) {
  CaptureFile c;
  c.path = "capture.npz";
  c.inputs = LoadedCase{in, describe_case(in, "test case", "", "", std::nullopt), false};
  c.outputs = std::move(outputs);
  return c;
}

Judged judge(const CaptureFile& c, const ArithmeticSpec& spec = {}) {
  const AttentionInputs& in = c.inputs->inputs;
  std::unique_ptr<Implementation> impl = make_captured_implementation(in, c, spec);
  return judge_case_keeping(*impl, in, c.inputs->description, nullptr, true);
}

// Row `row` of a one-head [1,1,S,D] tensor, every element x.
void fill_row(HostTensor& t, std::int64_t row, double x) {
  const std::int64_t d = t.dims().back();
  for (std::int64_t c = 0; c < d; ++c) t.set(row * d + c, x);
}

// The faithful output with row `row` NaN (a row whose softmax went NaN in the kernel), judged
// with nothing else captured, as a bug report's `out` alone is.
Judged judge_nan_row(const AttentionInputs& in, std::int64_t row) {
  std::map<std::string, HostTensor> outputs{{"out", faithful(in)["out"]}};
  fill_row(outputs["out"], row, NAN);
  return judge(capture_of(in, outputs));
}

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::vector<std::string> err;
};

Outcome cli(const std::string& arguments, const fs::path& dir) {
  const std::string command = std::string(FC_CLI_PATH) + " " + arguments + " >" + (dir / "out.txt").string() + " 2>" +
                              (dir / "err.txt").string();
  const int status = std::system(command.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream out(dir / "out.txt"), err(dir / "err.txt");
  o.out.assign(std::istreambuf_iterator<char>(out), std::istreambuf_iterator<char>());
  for (std::string line; std::getline(err, line);) o.err.push_back(line);
  return o;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("fc_check_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write_capture(const fs::path& path, const AttentionInputs& in, std::map<std::string, HostTensor> outputs) {
  outputs["q"] = in.q;
  outputs["k"] = in.k;
  outputs["v"] = in.v;
  REQUIRE((in.problem.mask.causal != Causal::bottom_right && in.problem.mask.key_lengths.empty() &&
           !in.problem.mask.has_dense()));  // what an SDPA report can say
  HostTensor causal(DType::boolean, {});
  causal.set(0, in.problem.mask.causal == Causal::top_left ? 1 : 0);
  outputs["is_causal"] = causal;
  write_npz(path.string(), outputs);
}

}  // namespace

TEST_CASE("a faithful kernel's output, lse and intermediates pass, each compared", "[check]") {
  for (const std::string mask : {"none", "causal", "padding+masked-rows"}) {
    INFO(mask);
    const AttentionInputs in = inputs_of({2, 2, 37, 75, 64}, mask);
    const Judged j = judge(capture_of(in, faithful(in)));
    CHECK(j.result.verdict == Verdict::pass);
    REQUIRE(j.result.outputs.size() == 6);  // scores, probs, max, sum, out, lse: every tensor given
    for (const OutputResult& r : j.result.outputs) {
      INFO(r.name);
      CHECK(r.compared);
      CHECK(r.end_to_end.elements > 0);
    }
    CHECK(j.result.outputs[4].quantity == Quantity::output);
    CHECK(j.result.outputs[5].quantity == Quantity::lse);
  }
}

TEST_CASE("only the tensors a capture holds are in the graph", "[check]") {
  const AttentionInputs in = inputs_of({1, 2, 20, 30, 32}, "none");
  std::map<std::string, HostTensor> all = faithful(in);
  const Judged j = judge(capture_of(in, {{"lse", all["lse"]}, {"row_sum", all["row_sum"]}}));
  REQUIRE(j.result.outputs.size() == 2);
  CHECK(j.result.outputs[0].name == "softmax.sum");
  CHECK(j.result.outputs[1].name == "lse");
  CHECK(j.result.verdict == Verdict::pass);
}

TEST_CASE("a NaN where the reference is finite is a finding at its element, a row off by a factor a scale mismatch",
          "[check]") {
  const AttentionInputs in = inputs_of({1, 2, 24, 40, 64}, "none");
  std::map<std::string, HostTensor> outputs{{"out", faithful(in)["out"]}};
  outputs["out"].set(((0 * 2 + 1) * 24 + 7) * 64 + 3, NAN);
  Judged j = judge(capture_of(in, outputs));
  CHECK(j.result.verdict == Verdict::diverged);
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->output == "pv");
  CHECK(j.result.divergence->index == Index4{0, 1, 7, 3});

  outputs = {{"out", faithful(in)["out"]}};
  for (std::int64_t c = 0; c < 64; ++c) {
    const std::int64_t at = ((0 * 2 + 0) * 24 + 5) * 64 + c;
    outputs["out"].set(at, 2 * outputs["out"].get(at));
  }
  j = judge(capture_of(in, outputs));
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->index == Index4{0, 0, 5, 0});
  CHECK(j.result.divergence->cause == "scale-mismatch");

  // A fully masked row's output must be 0 (the convention), a NaN there is that cause.
  const AttentionInputs masked = inputs_of({1, 1, 16, 16, 32}, "padding=0");
  outputs = {{"out", faithful(masked)["out"]}};
  outputs["out"].set(2 * 32 + 1, NAN);
  j = judge(capture_of(masked, outputs));
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->cause == "fully-masked-row");
  CHECK(j.result.divergence->index == Index4{0, 0, 2, 1});
}

TEST_CASE("a captured NaN with any payload is a NaN, poison patterns' included: never unwritten, never a crash",
          "[check]") {
  const AttentionInputs in = inputs_of({1, 2, 24, 40, 64}, "none");
  const std::int64_t at = ((0 * 2 + 1) * 24 + 7) * 64 + 3;
  // fp16 poison patterns: of the first buffers (the capture's own among them) and of an id no
  // buffer of the run has (the flag pass reads any id 1..62 from a pattern).
  for (const std::uint32_t id : {1u, 2u, 3u, 49u, 62u}) {
    INFO("id " << id);
    std::map<std::string, HostTensor> outputs{{"out", faithful(in)["out"]}};
    outputs["out"].data_as<std::uint16_t>()[at] = static_cast<std::uint16_t>(poison_bits(DType::f16, static_cast<int>(id)));
    const Judged j = judge(capture_of(in, outputs));
    CHECK(j.result.verdict == Verdict::diverged);
    REQUIRE(j.result.divergence);
    CHECK(j.result.divergence->index == Index4{0, 1, 7, 3});
    CHECK(j.result.divergence->cause != "unwritten-output");
    CHECK(j.result.divergence->cause != "uninitialized-read");
    const auto pv = std::find_if(j.result.outputs.begin(), j.result.outputs.end(),
                                 [](const OutputResult& r) { return r.name == "pv"; });
    REQUIRE(pv != j.result.outputs.end());
    CHECK(pv->flags.nan == 1);
    CHECK(pv->flags.unwritten == 0);
    CHECK(pv->flags.foreign_poison == 0);
  }
}

TEST_CASE("a poison pattern naming no buffer of the run is a NaN the kernel made", "[check]") {
  FlagCounts f;
  f.nan = 3;
  f.foreign_poison = 2;
  f.first_foreign = (5ull << 8) | 49u;
  forget_unknown_poison(f, 4);  // ids 1..3
  CHECK(f.foreign_poison == 0);
  CHECK(f.first_foreign == kNoIndex);
  CHECK(f.nan == 3);
  f.foreign_poison = 1;
  f.first_foreign = (5ull << 8) | 3u;
  forget_unknown_poison(f, 4);
  CHECK(f.foreign_poison == 1);
  CHECK(f.foreign_source() == 3);
}

// A report's output alone, computed as another problem: the output of `other`'s inputs.
std::string cause_of_output_from(const AttentionInputs& asked, const AttentionInputs& other, std::string* evidence) {
  const std::map<std::string, HostTensor> outputs{{"out", compute_reference(other, {}).output.to(asked.problem.dtype)}};
  const Judged j = judge(capture_of(asked, outputs));
  REQUIRE(j.result.divergence);
  *evidence = j.result.divergence->evidence;
  return j.result.divergence->cause;
}

TEST_CASE("an output alone that is another problem's attention is named: scale, causal alignment, K/V head",
          "[check]") {
  std::string evidence;
  {  // The scale applied twice (q pre-scaled, then scale = 1/sqrt(D) passed again).
    const AttentionInputs in = inputs_of({1, 2, 32, 48, 64}, "none");
    AttentionInputs twice = in;
    twice.problem.scale = in.problem.scale * in.problem.scale;
    CHECK(cause_of_output_from(in, twice, &evidence) == "scale-mismatch");
    CHECK(evidence.find("the scale applied twice") != std::string::npos);
  }
  {  // is_causal with Sq < Sk: aligned bottom-right where SDPA means top-left.
    const AttentionInputs in = inputs_of({1, 2, 16, 64, 64}, "causal");
    AttentionInputs bottom_right = in;
    bottom_right.problem.mask.causal = Causal::bottom_right;
    CHECK(cause_of_output_from(in, bottom_right, &evidence) == "mask-mismatch");
    CHECK(evidence.find("causal aligned bottom-right") != std::string::npos);
  }
  {  // GQA K/V heads expanded with repeat, not repeat_interleave: the two K/V heads swapped here.
    const AttentionInputs in = inputs_of({1, 4, 32, 48, 64, 2}, "none");
    AttentionInputs swapped = in;
    const std::int64_t per_head = 48 * 64;
    for (HostTensor* t : {&swapped.k, &swapped.v}) {
      const HostTensor original = *t;
      for (std::int64_t i = 0; i < per_head; ++i) {
        t->set(i, original.get(per_head + i));
        t->set(per_head + i, original.get(i));
      }
    }
    CHECK(cause_of_output_from(in, swapped, &evidence) == "wrong-operand");
    CHECK(evidence.find("K/V head 1, where query head 0's K/V head is 0") != std::string::npos);
  }
}

TEST_CASE("an output alone without its softcap, with ALiBi's sign flipped or with V read transposed is named",
          "[check]") {
  std::string evidence;
  {  // The softcap ignored.
    const AttentionInputs in = inputs_of({1, 2, 32, 48, 64}, "softcap=1");
    AttentionInputs uncapped = in;
    uncapped.problem.softcap = 0;
    CHECK(cause_of_output_from(in, uncapped, &evidence) == "mask-mismatch");
    CHECK(evidence.find("without the softcap") != std::string::npos);
  }
  {  // ALiBi's bias added with the wrong sign.
    const AttentionInputs in = inputs_of({1, 2, 32, 48, 64}, "alibi");
    AttentionInputs flipped = in;
    for (double& slope : flipped.problem.mask.alibi_slopes) slope = -slope;
    CHECK(cause_of_output_from(in, flipped, &evidence) == "mask-mismatch");
    CHECK(evidence.find("ALiBi's sign flipped") != std::string::npos);
  }
  {  // V's [keys][D] elements read as [D][keys], every head.
    const AttentionInputs in = inputs_of({1, 2, 32, 48, 64}, "none");
    AttentionInputs transposed = in;
    const std::int64_t keys = 48, d = 64;
    for (std::int64_t h = 0; h < 2; ++h) {
      for (std::int64_t i = 0; i < keys * d; ++i) {
        transposed.v.set(h * keys * d + (i % keys) * d + i / keys, in.v.get(h * keys * d + i));
      }
    }
    CHECK(cause_of_output_from(in, transposed, &evidence) == "wrong-operand");
    CHECK(evidence.find("V read transposed") != std::string::npos);
  }
}

// A capture of tests/data (tests/data/cause_probes/make_cause_probes.py), judged.
Divergence cause_probe(const std::string& file) {
  const Judged j = judge(read_capture_file(std::string(FC_TEST_DATA_DIR) + "/" + file));
  REQUIRE(j.result.divergence);
  return *j.result.divergence;
}

TEST_CASE("a cause is not fitted to noise just over the bound; zeros are no scale; a real scale at small scores is",
          "[check]") {
  // Random noise of 6 to 12 fp16 ulps on a correct output: a factor fitted on one element
  // "explained" it (the reference times 0.9946), counting elements the reference explains
  // as well. Only what a prediction fits much better than the reference is evidence.
  for (const char* file : {"check_noise_s2.npz", "check_noise_s3.npz"}) {
    INFO(file);
    const Divergence d = cause_probe(file);
    CHECK(d.cause != "scale-mismatch");
    CHECK(d.cause != "missing-keys");
    CHECK(d.cause != "duplicated-keys");
  }
  // Scores rounded to fp16 (no key dropped): "attention with key 2 left out" was as near.
  CHECK(cause_probe("check_fp16_scores.npz").cause == "precision-loss");
  // Scale 1/D where 1/sqrt(D) is meant, inputs of sd 0.3: many elements are only a bound or two
  // off, and the reference explaining them as well is no evidence against the scale.
  CHECK(cause_probe("check_scale_over_d.npz").cause == "scale-mismatch");

  // A row left at zero (never written into a zeroed buffer): "the reference times 0" is no scale.
  const AttentionInputs in = inputs_of({1, 1, 16, 24, 64}, "none");
  std::map<std::string, HostTensor> outputs{{"out", faithful(in)["out"]}};
  fill_row(outputs["out"], 5, 0.0);
  const Judged j = judge(capture_of(in, outputs));
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->index.row == 5);
  CHECK(j.result.divergence->cause != "scale-mismatch");
}

TEST_CASE("the softmax taken over the queries instead of the keys is softmax-axis, in the output or the probabilities",
          "[check]") {
  const AttentionInputs in = inputs_of({1, 1, 24, 40, 64}, "none");
  const HeadInputs head = head_inputs(in, 0, 0, BiasForm::mask);
  MatrixR p = head.scale * (head.q * head.k().transpose());
  for (Eigen::Index j = 0; j < p.cols(); ++j) {  // softmax(S, dim=-2): each key's column
    p.col(j) = (p.col(j).array() - p.col(j).maxCoeff()).exp().matrix();
    p.col(j) /= p.col(j).sum();
  }
  const MatrixR o = p * head.v();
  std::map<std::string, HostTensor> outputs = faithful(in);
  for (Eigen::Index i = 0; i < o.rows(); ++i) {
    for (Eigen::Index c = 0; c < o.cols(); ++c) outputs["out"].set(i * o.cols() + c, o(i, c));
    for (Eigen::Index j = 0; j < p.cols(); ++j) outputs["probs"].set(i * p.cols() + j, p(i, j));
  }
  {  // The output alone, as a bug report has it.
    const Judged j = judge(capture_of(in, {{"out", outputs["out"]}}));
    REQUIRE(j.result.divergence);
    CHECK(j.result.divergence->cause == "softmax-axis");
  }
  {  // The probabilities captured: found there first.
    const Judged j = judge(capture_of(in, {{"probs", outputs["probs"]}, {"out", outputs["out"]}}));
    REQUIRE(j.result.divergence);
    CHECK(j.result.divergence->output == "softmax");
    CHECK(j.result.divergence->cause == "softmax-axis");
  }
}

TEST_CASE("score-overflow needs the row to show it: every element NaN, no finite lse captured", "[check]") {
  AttentionInputs in = inputs_of({1, 1, 16, 32, 64}, "none");
  fill_row(in.q, 3, 40.0);  // row 3 . key 5 = 102400 > 65504
  fill_row(in.k, 5, 40.0);
  {  // One infinity in an otherwise right row (the overflowing row's other elements are finite).
    std::map<std::string, HostTensor> outputs{{"out", faithful(in)["out"]}};
    outputs["out"].set(3 * 64 + 7, INFINITY);
    const Judged j = judge(capture_of(in, outputs));
    REQUIRE(j.result.divergence);
    CHECK(j.result.divergence->index == Index4{0, 0, 3, 7});
    CHECK(j.result.divergence->cause != "score-overflow");
  }
  {  // The row NaN, but the kernel's lse of the row is finite and right: its softmax was not NaN.
    std::map<std::string, HostTensor> outputs{{"out", faithful(in)["out"]}, {"lse", faithful(in)["lse"]}};
    fill_row(outputs["out"], 3, NAN);
    const Judged j = judge(capture_of(in, outputs));
    REQUIRE(j.result.divergence);
    CHECK(j.result.divergence->cause != "score-overflow");
  }
  {  // The row NaN and nothing else captured: score-overflow, as before.
    const Judged j = judge_nan_row(in, 3);
    REQUIRE(j.result.divergence);
    CHECK(j.result.divergence->cause == "score-overflow");
  }
  {  // Seen first in the row max: +inf there is the overflow's own signature, the sum NaN.
    std::map<std::string, HostTensor> outputs = faithful(in);
    outputs.erase("scores");
    outputs.erase("probs");
    outputs.erase("lse");
    outputs["row_max"].set(3, INFINITY);
    outputs["row_sum"].set(3, NAN);
    fill_row(outputs["out"], 3, NAN);
    const Judged j = judge(capture_of(in, outputs));
    REQUIRE(j.result.divergence);
    CHECK(j.result.divergence->cause == "score-overflow");
  }
}

TEST_CASE("score-overflow seen in the probabilities: NaN over the attended keys, 0 where masked", "[check]") {
  AttentionInputs in = inputs_of({1, 1, 16, 32, 64}, "causal");
  fill_row(in.q, 3, 40.0);  // row 3 . key 2 = 102400 > 65504; row 3 attends keys 0..3
  fill_row(in.k, 2, 40.0);
  std::map<std::string, HostTensor> outputs = faithful(in);
  outputs.erase("scores");
  outputs.erase("lse");
  outputs.erase("row_max");
  outputs.erase("row_sum");
  for (std::int64_t key = 0; key <= 3; ++key) outputs["probs"].set(3 * 32 + key, NAN);  // masked keys stay 0
  fill_row(outputs["out"], 3, NAN);
  const Judged j = judge(capture_of(in, outputs));
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->output == "softmax");
  CHECK(j.result.divergence->cause == "score-overflow");
}

TEST_CASE("a NaN output row whose q.k overflows fp16 before the scale is score-overflow, its scores not captured",
          "[check]") {
  AttentionInputs in = inputs_of({1, 1, 16, 32, 64}, "none");
  fill_row(in.q, 3, 40.0);  // row 3 . key 5 = 64 * 40 * 40 = 102400 > 65504
  fill_row(in.k, 5, 40.0);
  fill_row(in.k, 6, -50.0);  // 128000 the other way: -inf, a key masked
  const Judged j = judge_nan_row(in, 3);
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->index == Index4{0, 0, 3, 0});
  CHECK(j.result.divergence->cause == "score-overflow");
  // The product named is the one that makes the NaN, +inf, not the larger one that masks a key.
  CHECK(j.result.divergence->evidence.find("a product q.k of 102400") != std::string::npos);

  // Only a negative overflow: -inf masks a key and leaves the softmax finite, so a NaN row there
  // has another cause.
  fill_row(in.k, 5, -40.0);
  const Judged n = judge_nan_row(in, 3);
  REQUIRE(n.result.divergence);
  CHECK(n.result.divergence->cause != "score-overflow");
}

TEST_CASE("fp16 scores stored as fp32 with an infinity where q.k overflows fp16 are score-overflow", "[check]") {
  AttentionInputs in = inputs_of({1, 1, 16, 32, 64}, "none");
  fill_row(in.q, 3, 40.0);  // row 3 . key 5 = 102400 > 65504, a score of 12800: finite in fp32
  fill_row(in.k, 5, 40.0);
  std::map<std::string, HostTensor> outputs = faithful(in);
  outputs.erase("probs");
  outputs["scores"].set(3 * 32 + 5, INFINITY);
  const Judged j = judge(capture_of(in, outputs));
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->output == "qk");
  CHECK(j.result.divergence->index == Index4{0, 0, 3, 5});
  CHECK(j.result.divergence->cause == "score-overflow");
  CHECK(j.result.divergence->evidence.find("beyond fp16's 65504") != std::string::npos);
  CHECK(j.result.divergence->evidence.find("(stored as fp32)") != std::string::npos);
}

TEST_CASE("a -inf in fp32 scores is left to the mask hypotheses, even where q.k is beyond fp16", "[check]") {
  AttentionInputs in = inputs_of({1, 1, 16, 32, 64}, "none");
  fill_row(in.q, 0, 40.0);  // row 0 . key 0 = -102400: beyond fp16 the other way
  fill_row(in.k, 0, -40.0);
  std::map<std::string, HostTensor> outputs = faithful(in);
  outputs.erase("probs");
  for (std::int64_t i = 0; i < 4; ++i) outputs["scores"].set(i * 32 + i, -INFINITY);  // the diagonal masked: a mask bug
  const Judged j = judge(capture_of(in, outputs));
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->index == Index4{0, 0, 0, 0});
  CHECK(j.result.divergence->cause == "mask-mismatch");
}

TEST_CASE("with a scale above 1 the NaN row's evidence names the scaled score that overflows", "[check]") {
  AttentionInputs in = inputs_of({1, 1, 16, 32, 64}, "none");
  in.problem.scale = 4;
  fill_row(in.q, 3, 20.0);  // row 3 . key 5 = 25600, a score of 102400
  fill_row(in.k, 5, 20.0);
  const Judged j = judge_nan_row(in, 3);
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->cause == "score-overflow");
  CHECK(j.result.divergence->evidence.find("a score of 102400 (q.k 25600 times the scale 4)") != std::string::npos);
}

TEST_CASE("a row masked by float32's most negative bias in an fp16 kernel is fully-masked-row", "[check]") {
  AttentionInputs in = inputs_of({1, 1, 16, 32, 64}, "none");
  HostTensor bias(DType::f32, {1, 1, 16, 32});
  for (std::int64_t j = 0; j < 32; ++j) bias.set(2 * 32 + j, -3.4028234663852886e38);
  in.problem.mask.dense = bias;
  const Judged j = judge_nan_row(in, 2);
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->index == Index4{0, 0, 2, 0});
  CHECK(j.result.divergence->cause == "fully-masked-row");
  CHECK(j.result.divergence->evidence.find("beyond fp16's range") != std::string::npos);
}

TEST_CASE("a key padding mask [B,1,1,Sk] broadcasts over the query rows, as PyTorch's SDPA reads it", "[check]") {
  TempDir dir;
  const AttentionInputs in = inputs_of({2, 2, 16, 24, 32}, "none");
  HostTensor mask(DType::boolean, {2, 1, 1, 24});
  const std::int64_t lengths[] = {10, 24};
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t j = 0; j < 24; ++j) mask.set(b * 24 + j, j < lengths[b] ? 1 : 0);
  }
  const fs::path path = dir.path / "report.npz";
  write_npz(path.string(), {{"q", in.q}, {"k", in.k}, {"v", in.v}, {"attn_mask", mask}});
  const LoadedCase report = load_case(path.string());
  REQUIRE(report.inputs.problem.mask.dense.dims() == Dims{2, 1, 16, 24});
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t i = 0; i < 16; ++i) {
      for (std::int64_t j = 0; j < 24; ++j) CHECK((mask_bias(report.inputs.problem, b, 1, i, j) == 0) == (j < lengths[b]));
    }
  }
  // A query-row dimension that is neither 1 nor Sq is still refused, naming the shape.
  write_npz(path.string(), {{"q", in.q}, {"k", in.k}, {"v", in.v}, {"attn_mask", HostTensor(DType::boolean, {2, 1, 3, 24})}});
  std::string refused;
  try {
    load_case(path.string());
  } catch (const Error& e) {
    refused = e.what();
  }
  CHECK(refused.find("does not broadcast") != std::string::npos);
}

TEST_CASE("a wrong lse is found in the lse stage, stage-locally when the row max and sum were captured", "[check]") {
  const AttentionInputs in = inputs_of({1, 1, 30, 50, 64}, "causal");
  std::map<std::string, HostTensor> outputs = faithful(in);
  outputs["lse"].set(11, outputs["lse"].get(11) + 0.01);
  const Judged j = judge(capture_of(in, outputs));
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->output == "lse");
  CHECK(j.result.divergence->index == Index4{0, 0, 11, -1});
  CHECK(j.result.divergence->stage_local);
}

TEST_CASE("the declared arithmetic sets the bounds", "[check]") {
  const AttentionInputs in = inputs_of({1, 1, 16, 64, 64}, "none");
  const CaptureFile c = capture_of(in, {{"out", faithful(in)["out"]}});
  const Judged fp32_acc = judge(c, parse_arithmetic("fp16-fp32acc"));
  const Judged fp16_acc = judge(c, parse_arithmetic("fp16-fp16acc"));
  const Judged fp32_probs = judge(c, parse_arithmetic("probs=fp32"));
  const HostTensor& b32 = fp32_acc.references[0].end_to_end_bound;
  const HostTensor& b16 = fp16_acc.references[0].end_to_end_bound;
  const HostTensor& p32 = fp32_probs.references[0].end_to_end_bound;
  REQUIRE(b32.numel() == 16 * 64);
  int larger = 0, smaller = 0;
  for (std::int64_t i = 0; i < b32.numel(); ++i) {
    larger += b16.get(i) > 4 * b32.get(i);  // u_fp16 = 8192 u_fp32 in the accumulation term
    smaller += p32.get(i) < b32.get(i);     // no rounding of p to fp16 for P.V
  }
  CHECK(larger == b32.numel());
  CHECK(smaller == b32.numel());
}

TEST_CASE("per-split partials are judged as a split-KV run, a wrong split found at its normalize", "[check]") {
  const AttentionInputs in = inputs_of({1, 2, 20, 150, 32}, "causal-br");
  const std::int64_t splits = 3, tile = 32;
  HostTensor partial_out(DType::f32, {1, 2, splits, 20, 32}), partial_lse(DType::f32, {1, 2, splits, 20});
  std::map<std::string, HostTensor> outputs;
  for (std::int64_t h = 0; h < 2; ++h) {
    const HeadInputs head = head_inputs(in, 0, h);
    const SplitReference r = split_reference(head, splits, tile, nominal_arithmetic(DType::f16));
    for (std::int64_t t = 0; t < splits; ++t) {
      const BlockedReference& s = r.splits[static_cast<std::size_t>(t)];
      for (std::int64_t i = 0; i < 20; ++i) {
        partial_lse.set((h * splits + t) * 20 + i, s.lse.value(i, 0));
        for (std::int64_t d = 0; d < 32; ++d) partial_out.set(((h * splits + t) * 20 + i) * 32 + d, s.out.value(i, d));
      }
    }
  }
  const std::map<std::string, HostTensor> full = faithful(in);
  CaptureFile c = capture_of(in, {{"out", full.at("out")}, {"lse", full.at("lse")}, {"partial_out", partial_out},
                                  {"partial_lse", partial_lse}});
  c.tile_width = tile;
  Judged j = judge(c);
  CHECK(j.result.algorithm == "split-KV, 3 splits, tiles of 32 keys");
  CHECK(j.result.verdict == Verdict::pass);
  REQUIRE(j.result.outputs.size() == 2 * 3 + 2);

  const std::int64_t at = ((1 * splits + 1) * 20 + 4) * 32 + 9;  // h=1, split 1, row 4, col 9
  c.outputs["partial_out"].set(at, c.outputs["partial_out"].get(at) + 0.25);
  j = judge(c);
  REQUIRE(j.result.divergence);
  CHECK(j.result.divergence->output == "normalize[1]");
  CHECK(j.result.divergence->index == Index4{0, 1, 4, 9});
}

TEST_CASE("a capture that disagrees with its inputs or its arithmetic is refused naming the tensor", "[check]") {
  const AttentionInputs in = inputs_of({1, 2, 10, 12, 16}, "none");
  const std::map<std::string, HostTensor> good = faithful(in);
  const auto refused = [&](std::map<std::string, HostTensor> outputs, const std::string& arithmetic,
                           const std::string& message) {
    INFO(message);
    CaptureFile c = capture_of(in, std::move(outputs));
    const ArithmeticSpec spec = arithmetic.empty() ? ArithmeticSpec{} : parse_arithmetic(arithmetic);
    try {
      make_captured_implementation(in, c, spec);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("capture.npz: ") == 0);
      CHECK(std::string(e.what()).find(message) != std::string::npos);
    }
  };
  refused({{"out", good.at("out").reshaped({1, 2, 20, 8})}}, "", "'out' has shape [1,2,20,8]; the inputs give [1,2,10,16]");
  refused({{"lse", good.at("row_max").reshaped({2, 10})}}, "", "'lse' has shape [2,10]");
  refused({{"out", good.at("out")}}, "bf16-fp32acc", "q, k and v are fp16 but the arithmetic says the inputs are bf16");
  refused({{"out", good.at("out").to(DType::bf16)}}, "fp16-fp32acc", "'out' is stored as bf16 but the arithmetic says");
  refused({{"probs", good.at("probs").to(DType::f16)}}, "probs=bf16", "'probs' is stored as fp16");
  refused({{"partial_out", HostTensor(DType::f32, {1, 2, 2, 10, 16})}}, "", "need both 'partial_out' and 'partial_lse'");
  refused({}, "", "nothing to check");
  for (const std::string bad : {"fp8", "accumulate=bf16", "probs=int8", "tensor-cores=maybe", "colour=red", ""}) {
    CHECK_THROWS_AS(parse_arithmetic(bad), Error);
  }
  const ArithmeticSpec mixed = parse_arithmetic("bf16-fp32acc,probs=fp32,tensor-cores=no");
  CHECK(mixed.input == DType::bf16);
  CHECK(mixed.probs == DType::f32);
  CHECK(mixed.tensor_cores == false);
}

TEST_CASE("check on the command line: exit 0, 1 and 2, pairs of files, folders judged in parallel in order",
          "[check]") {
  TempDir dir;
  const AttentionInputs a = inputs_of({1, 2, 33, 65, 64}, "causal", DType::f16, 1);
  const AttentionInputs b = inputs_of({2, 1, 40, 40, 32}, "none", DType::f16, 2);
  std::map<std::string, HostTensor> bad{{"out", faithful(b)["out"]}};
  bad["out"].set(100, 7.0);
  fs::create_directories(dir.path / "many");
  write_capture(dir.path / "many" / "a.npz", a, {{"out", faithful(a)["out"]}});
  write_capture(dir.path / "many" / "b.npz", b, bad);
  write_capture(dir.path / "many" / "c.npz", b, {{"out", faithful(b)["out"]}, {"lse", faithful(b)["lse"]}});
  write_capture(dir.path / "inputs.npz", a, {});
  write_npz((dir.path / "outputs.npz").string(), {{"out", faithful(a)["out"]}});

  Outcome o = cli("check " + (dir.path / "many" / "a.npz").string(), dir.path);
  CHECK(o.exit_code == 0);
  CHECK(o.out.find("1 capture: 1 pass") != std::string::npos);

  o = cli("check " + (dir.path / "inputs.npz").string() + " " + (dir.path / "outputs.npz").string(), dir.path);
  CHECK(o.exit_code == 0);
  CHECK(o.out.find("from " + (dir.path / "inputs.npz").string()) != std::string::npos);

  const fs::path json = dir.path / "check.json", html = dir.path / "check.html";
  o = cli("check " + (dir.path / "many").string() + " --json " + json.string() + " --html " + html.string(), dir.path);
  CHECK(o.exit_code == 1);
  std::ifstream page(html);
  const std::string page_text((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  CHECK(page_text.find((dir.path / "many" / "b.npz").string()) != std::string::npos);
  CHECK(o.out.find("3 captures: 2 pass, 1 diverged, 0 error") != std::string::npos);
  const std::size_t first = o.out.find("a.npz"), second = o.out.find("b.npz"), third = o.out.find("c.npz");
  CHECK((first < second && second < third && third != std::string::npos));
  o = cli("check " + (dir.path / "many").string() + " --quiet", dir.path);
  CHECK(o.out == "3 captures: 2 pass, 1 diverged, 0 error\n");  // --quiet: the summary line alone
  std::ifstream in(json);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"diverged\": 1") != std::string::npos);

  // Bad input: one line naming the file, exit 2, no report written.
  fs::remove(json);
  const std::vector<std::pair<std::string, std::string>> bad_runs = {
      {"check " + (dir.path / "outputs.npz").string(), "outputs.npz: missing array 'q'"},
      {"check " + (dir.path / "many" / "a.npz").string() + " --arithmetic bf16-fp32acc",
       "q, k and v are fp16 but the arithmetic says the inputs are bf16"},
      {"check " + (dir.path / "many" / "a.npz").string() + " --arithmetic fp8", "--arithmetic 'fp8': unknown preset"},
      {"check " + (dir.path / "many" / "c.npz").string() + " " + (dir.path / "outputs.npz").string(),
       "is also in"},
  };
  for (const auto& [arguments, message] : bad_runs) {
    INFO(arguments);
    o = cli(arguments + " --json " + json.string(), dir.path);
    CHECK(o.exit_code == 2);
    REQUIRE(o.err.size() == 1);
    CHECK(o.err[0].find(message) != std::string::npos);
    CHECK_FALSE(fs::exists(json));
  }
  std::ofstream(dir.path / "unknown.npz") << "PK not really";
  o = cli("check " + (dir.path / "unknown.npz").string(), dir.path);
  CHECK(o.exit_code == 2);
  CHECK(o.err.size() == 1);
}

TEST_CASE("cuDNN's SDPA on rows with no key to attend: attention with the mask ignored, a real H100 finding",
          "[check]") {
  // tests/data/trim_capture.py: cuDNN 9.19 (torch 2.11) on the H100, a padded boolean mask whose
  // rows 0, 56 and 112 attend no key. Where attention over no key is 0, cuDNN writes softmax over
  // every key: its masking bias is finite and cancels.
  const CaptureFile c = read_capture_file(std::string(FC_TEST_DATA_DIR) + "/cudnn_masked_rows.npz");
  const Judged j = judge(c);
  REQUIRE(j.result.divergence);
  const Divergence& d = *j.result.divergence;
  INFO(d.cause << ": " << d.evidence);
  CHECK(d.stage == "pv");
  CHECK((d.index.b == 0 && d.index.h == 0 && d.index.row == 0 && d.index.col == 0));
  CHECK(d.cause == "mask-mismatch");
  CHECK(d.evidence.find("3 rows of b=0 h=0 have no key to attend to, and the kernel wrote attention over every key "
                        "with the mask ignored") != std::string::npos);
  CHECK(d.evidence.find("192 of 192 bad elements") != std::string::npos);  // the three rows, nothing else
}

TEST_CASE("triage judges the output a report holds beside the implementations", "[check]") {
  TempDir dir;
  const AttentionInputs in = inputs_of({1, 1, 24, 24, 64}, "none");
  std::map<std::string, HostTensor> outputs{{"out", faithful(in)["out"]}};
  outputs["out"].set(5 * 64 + 2, NAN);
  write_capture(dir.path / "report.npz", in, outputs);
  const Outcome o = cli("triage " + (dir.path / "report.npz").string() + " --impl cpu-emulated", dir.path);
  CHECK(o.exit_code == 1);
  CHECK(o.out.find("captured: diverged") != std::string::npos);
  CHECK(o.out.find("cpu-emulated: pass") != std::string::npos);
  // Only the report's own output diverged: minimizing has nothing it can rerun, and says so.
  const Outcome m = cli("triage " + (dir.path / "report.npz").string() + " --impl cpu-emulated --minimize " +
                            (dir.path / "min.h5").string(),
                        dir.path);
  CHECK(m.exit_code == 1);
  CHECK(m.out.find("nothing to minimize: the report's output diverged, but no implementation run here did") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "min.h5"));
}

}  // namespace fc

namespace fc {

TEST_CASE("a CPU implementation whose captures or matrices the machine cannot hold is declined before it runs",
          "[check]") {
  // Keys enough that the fp32 scores alone exceed this machine's memory.
  const auto keys = static_cast<std::int64_t>(1.1 * std::sqrt(static_cast<double>(physical_host_bytes()) / 4));
  CaseSpec spec;
  spec.shape = {1, 1, keys, keys, 8};
  const AttentionInputs in = generate_inputs(spec);
  for (const std::string name : {"cpu-emulated", "cpu-emulated-paged"}) {
    INFO(name);
    std::unique_ptr<Implementation> impl = make_implementation(name);
    const Judged j = judge_case_keeping(*impl, in, describe_case(in, "huge", "none", "normal", 1), nullptr, false);
    CHECK(j.result.verdict == Verdict::skipped);
    CHECK(j.result.reason.find("GiB") != std::string::npos);
  }
}

}  // namespace fc

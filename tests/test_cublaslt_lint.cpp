// cuBLASLt descriptors on the CPU (no handle, no GPU): the setter logs every Set, read_back
// returns what cuBLASLt holds, and each lint rule fires on exactly the bug planted for it.
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "core/json.h"
#include "stages/cublaslt/descriptor_dump.h"
#include "stages/cublaslt/descriptor_json.h"
#include "stages/cublaslt/lint.h"
#include "stages/cublaslt/lt_handles.h"
#include "stages/cublaslt/lt_setter.h"
#include "stages/cublaslt/lt_types.h"

namespace fc {
namespace {

// Strided-batched Q·Kᵀ: batch·heads 256, 32 queries, 128 keys, head dim 64. Q [256, 32, 64] and
// K [256, 128, 64] are row-major fp16; the scores [256, 32, 128] are row-major fp32.
// cuBLASLt is column-major, so the row-major scores are computed as their transpose:
//   scoresᵀ (Sk × Sq, column-major, ld Sk) = K (Sk × D) · Qᵀ (D × Sq)
// K row-major [Sk, D] is column-major [D, Sk] with ld D: A = K, rows D, cols Sk, TRANSA = T.
// Q row-major [Sq, D] is column-major [D, Sq] with ld D: B = Q, rows D, cols Sq, TRANSB = N.
constexpr std::int64_t kBatch = 256, kSq = 32, kSk = 128, kD = 64;

// How B's batch attributes are set: through the typed setter, or as the seed reports did, from
// plain 4-byte ints through the raw path with the statuses ignored.
enum class BatchPath { typed, seed_raw_int };

struct QkDescriptors {
  LtMatmulDesc desc{CUBLAS_COMPUTE_32F, CUDA_R_32F};
  LtMatrixLayout a{CUDA_R_16F, kD, kSk, kD};
  LtMatrixLayout b{CUDA_R_16F, kD, kSq, kD};
  LtMatrixLayout c{CUDA_R_32F, kSk, kSq, kSk};
  LtMatrixLayout d{CUDA_R_32F, kSk, kSq, kSk};
  LtMatmulPreference preference;
  SetLog log;

  explicit QkDescriptors(BatchPath b_path = BatchPath::typed) {
    set_desc(log, desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set_desc(log, desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    set_batch("A", a, kSk * kD);
    if (b_path == BatchPath::typed) {
      set_batch("B", b, kSq * kD);
    } else {
      int count = kBatch, stride = kSq * kD, ld = kD;
      set_layout_raw(log, "B", b.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      set_layout_raw(log, "B", b.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
      set_layout_raw(log, "B", b.get(), CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld);
    }
    set_batch("C", c, kSq * kSk);
    set_batch("D", d, kSq * kSk);
    set_preference(log, preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 32 << 20);
  }

  void set_batch(const char* operand, const LtMatrixLayout& layout, std::int64_t stride) {
    set_layout(log, operand, layout.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, kBatch);
    set_layout(log, operand, layout.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
  }

  MatmulRecord record(const cublasLtMatmulAlgo_t* algo = nullptr,
                      const cublasLtMatmulHeuristicResult_t* heuristic = nullptr) const {
    return read_back("qk", desc.get(), a.get(), b.get(), c.get(), d.get(), preference.get(), algo, heuristic, log);
  }
};

// The buffers the harness allocates for Q·Kᵀ; the scores are C and D, and beta is 0.
LintContext qk_context() {
  LintContext context;
  context.a = {"K", DType::f16, kBatch * kSk * kD};
  context.b = {"Q", DType::f16, kBatch * kSq * kD};
  context.c = {"scores", DType::f32, kBatch * kSq * kSk, false};
  context.d = {"scores", DType::f32, kBatch * kSq * kSk, false};
  context.next_stage_reads = DType::f32;  // softmax reads fp32 scores
  return context;
}

std::string describe(const std::vector<LintFinding>& findings) {
  std::string s;
  for (const LintFinding& f : findings) s += f.rule + " [" + f.operand + "] " + f.message + "\n";
  return s;
}

// Every finding is `rule` on `operand`, and there is at least one.
void check_only(const std::vector<LintFinding>& findings, const std::string& rule, const std::string& operand) {
  INFO(describe(findings));
  REQUIRE(!findings.empty());
  for (const LintFinding& f : findings) {
    CHECK(f.rule == rule);
    CHECK(f.operand == operand);
  }
}

std::string dump_text(const MatmulRecord& record) {
  std::ostringstream out;
  dump(out, record);
  return out.str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a strided-batched Q·Kᵀ descriptor set lints clean", "[lint]") {
  const QkDescriptors qk;
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  INFO(describe(findings));
  CHECK(findings.empty());
}

TEST_CASE("read_back returns exactly what was set, each Get succeeding", "[lint]") {
  const QkDescriptors qk;
  const MatmulRecord r = qk.record();
  CHECK(r.name == "qk");
  CHECK(failed_reads(r).empty());
  CHECK(r.desc.compute_type.value == CUBLAS_COMPUTE_32F);
  CHECK(r.desc.scale_type.value == CUDA_R_32F);
  CHECK(r.desc.transa.value == CUBLAS_OP_T);
  CHECK(r.desc.transb.value == CUBLAS_OP_N);
  CHECK(r.desc.epilogue.value == CUBLASLT_EPILOGUE_DEFAULT);
  CHECK(r.desc.pointer_mode.value == CUBLASLT_POINTER_MODE_HOST);
  CHECK(r.a.operand == "A");
  CHECK(r.a.type.value == CUDA_R_16F);
  CHECK(r.a.order.value == CUBLASLT_ORDER_COL);
  CHECK(r.a.rows.value == static_cast<std::uint64_t>(kD));
  CHECK(r.a.cols.value == static_cast<std::uint64_t>(kSk));
  CHECK(r.a.ld.value == kD);
  CHECK(r.a.batch_count.value == kBatch);
  CHECK(r.a.strided_batch_offset.value == kSk * kD);
  CHECK(r.b.strided_batch_offset.value == kSq * kD);
  CHECK(r.d.type.value == CUDA_R_32F);
  CHECK(r.d.ld.value == kSk);
  CHECK(r.d.strided_batch_offset.value == kSq * kSk);
  CHECK(r.preference.max_workspace_bytes.value == 32u << 20);
  CHECK(!r.algo);
  CHECK(!r.heuristic);
  CHECK(r.sets.size() == 11);
  for (const SetEntry& e : r.sets) CHECK(e.ok());
}

TEST_CASE("the typed setter passes each attribute's documented size and logs the bytes", "[lint]") {
  const QkDescriptors qk;
  const SetEntry& transa = qk.log.at(0);
  CHECK(transa.name() == "matmul desc: TRANSA");
  CHECK(transa.size == 4);
  CHECK(transa.expected == AttributeType::int32);
  const SetEntry& stride = qk.log.at(3);
  CHECK(stride.name() == "layout A: STRIDED_BATCH_OFFSET");
  CHECK(stride.operand == "A");
  CHECK(stride.size == 8);
  CHECK(stride.bytes.size() == 8);
  CHECK(set_value_text(stride) == "8192");
  CHECK(qk.log.back().name() == "preference: MAX_WORKSPACE_BYTES");
  CHECK(qk.log.back().size == 8);
}

TEST_CASE("the typed setter refuses a value its attribute's type cannot hold, before calling cuBLASLt", "[lint]") {
  QkDescriptors qk;
  const std::size_t logged = qk.log.size();
  CHECK_THROWS_AS(set_layout(qk.log, "B", qk.b.get(), CUBLASLT_MATRIX_LAYOUT_ROWS, -1), Error);
  CHECK_THROWS_AS(set_layout(qk.log, "B", qk.b.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, std::int64_t{1} << 40), Error);
  CHECK_THROWS_AS(set_preference(qk.log, qk.preference.get(), CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, 1), Error);
  CHECK(qk.log.size() == logged);
}

TEST_CASE("the seed bug, 4-byte ints through the raw setter with statuses ignored, is a set-status finding", "[lint]") {
  const QkDescriptors qk(BatchPath::seed_raw_int);
  const MatmulRecord r = qk.record();
  // cuBLASLt refused the two int64 attributes and kept their previous values.
  CHECK(r.b.batch_count.value == kBatch);
  CHECK(r.b.strided_batch_offset.value == 0);
  CHECK(r.b.ld.value == kD);
  const std::vector<LintFinding> findings = lint(r, qk_context());
  check_only(findings, lint_rule::set_status, "B");
  REQUIRE(findings.size() == 2);
  CHECK(findings[0].message ==
        "layout B: STRIDED_BATCH_OFFSET set from 4 bytes, status 7 (CUBLAS_STATUS_INVALID_VALUE); int64 expected");
  CHECK(findings[1].message == "layout B: LD set from 4 bytes, status 7 (CUBLAS_STATUS_INVALID_VALUE); int64 expected");
}

TEST_CASE("rows and cols swapped on B address past Q's buffer and break the product: out-of-bounds, shape-mismatch",
          "[lint]") {
  QkDescriptors qk;
  set_layout(qk.log, "B", qk.b.get(), CUBLASLT_MATRIX_LAYOUT_ROWS, kSq);
  set_layout(qk.log, "B", qk.b.get(), CUBLASLT_MATRIX_LAYOUT_COLS, kD);
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  INFO(describe(findings));
  REQUIRE(findings.size() == 2);
  CHECK(findings[0].rule == lint_rule::out_of_bounds);
  CHECK(findings[0].operand == "B");
  // Last element: batch 255 starts at 255·2048; column 63 at 63·64; row 31.
  CHECK(contains(findings[0].message, "addresses elements 0..526303 of buffer Q (524288 fp16 elements), past its end"));
  CHECK(findings[1].rule == lint_rule::shape_mismatch);
  CHECK(findings[1].message == "op(A) is 128 x 64 and op(B) 32 x 64: their inner dims differ");
}

TEST_CASE("a K layout with rows and cols exchanged inside its buffer is a shape-mismatch", "[lint]") {
  // K as column-major [Sk x D] (ld Sk): within K's buffer, but op(A) = Aᵀ is D x Sk against B's D rows.
  QkDescriptors qk;
  set_layout(qk.log, "A", qk.a.get(), CUBLASLT_MATRIX_LAYOUT_ROWS, kSk);
  set_layout(qk.log, "A", qk.a.get(), CUBLASLT_MATRIX_LAYOUT_COLS, kD);
  set_layout(qk.log, "A", qk.a.get(), CUBLASLT_MATRIX_LAYOUT_LD, kSk);
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  check_only(findings, lint_rule::shape_mismatch, "A");
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].message == "op(A) is 64 x 128 and op(B) 64 x 32: their inner dims differ");
}

TEST_CASE("a C of other dims than op(A) op(B) is a shape-mismatch", "[lint]") {
  QkDescriptors qk;
  set_layout(qk.log, "C", qk.c.get(), CUBLASLT_MATRIX_LAYOUT_COLS, kSq / 2);
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  check_only(findings, lint_rule::shape_mismatch, "C");
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].message == "C is 128 x 16, op(A) op(B) is 128 x 32");
}

TEST_CASE("a strided batch offset pointing before the buffer is out-of-bounds", "[lint]") {
  QkDescriptors qk;
  set_layout(qk.log, "A", qk.a.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, -kSk * kD);
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  check_only(findings, lint_rule::out_of_bounds, "A");
  CHECK(contains(findings[0].message, "before its start"));
}

TEST_CASE("an ld smaller than the rows of a column-major layout is ld-too-small", "[lint]") {
  QkDescriptors qk;
  set_layout(qk.log, "B", qk.b.get(), CUBLASLT_MATRIX_LAYOUT_LD, kD / 2);
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  check_only(findings, lint_rule::ld_too_small, "B");
  CHECK(findings.size() == 1);
  CHECK(findings[0].message == "B: ld 32 < rows 64 (COL order: columns overlap)");
}

TEST_CASE("an ld smaller than the cols of a row-major layout is ld-too-small", "[lint]") {
  // D as row-major [Sk, Sq] holds the same elements as column-major [Sq, Sk]... with ld ≥ Sq.
  QkDescriptors qk;
  set_layout(qk.log, "D", qk.d.get(), CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_ROW);
  set_layout(qk.log, "D", qk.d.get(), CUBLASLT_MATRIX_LAYOUT_LD, kSq / 2);
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  check_only(findings, lint_rule::ld_too_small, "D");
  CHECK(findings[0].message == "D: ld 16 < cols 32 (ROW order: rows overlap)");
}

TEST_CASE("a CUDA_R_16F layout over the fp32 scores is a dtype-mismatch, twice over for D", "[lint]") {
  QkDescriptors qk;
  set_layout(qk.log, "D", qk.d.get(), CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_16F);
  const std::vector<LintFinding> findings = lint(qk.record(), qk_context());
  check_only(findings, lint_rule::dtype_mismatch, "D");
  REQUIRE(findings.size() == 2);  // the buffer holds fp32, and the softmax reads fp32
  CHECK(findings[0].message == "D: layout type CUDA_R_16F but buffer scores (1048576 fp32 elements) holds CUDA_R_32F");
  CHECK(findings[1].message == "D: written as CUDA_R_16F but the next stage reads it as fp32");
}

TEST_CASE("fp32 scores read as fp16 by the next stage are a dtype-mismatch on D", "[lint]") {
  const QkDescriptors qk;
  LintContext context = qk_context();
  context.next_stage_reads = DType::f16;
  const std::vector<LintFinding> findings = lint(qk.record(), context);
  check_only(findings, lint_rule::dtype_mismatch, "D");
  CHECK(findings.size() == 1);
}

TEST_CASE("beta = 1 over a C that nothing wrote is beta-uninitialized", "[lint]") {
  const QkDescriptors qk;
  LintContext context = qk_context();
  context.beta = 1;
  const std::vector<LintFinding> findings = lint(qk.record(), context);
  check_only(findings, lint_rule::beta_uninitialized, "C");
  CHECK(findings.size() == 1);
  CHECK(findings[0].message ==
        "C: beta = 1 reads buffer scores (1048576 fp32 elements), which nothing wrote before this matmul");
  context.c.written_before = true;
  CHECK(lint(qk.record(), context).empty());
}

TEST_CASE("COMPUTE_32F with a CUDA_R_16F scale is accepted by cuBLASLt's Set and caught as scale-type", "[lint]") {
  QkDescriptors qk;
  // cuBLASLt checks only the size at Set time: this Set succeeds.
  CHECK(set_desc(qk.log, qk.desc.get(), CUBLASLT_MATMUL_DESC_SCALE_TYPE, CUDA_R_16F) == CUBLAS_STATUS_SUCCESS);
  const MatmulRecord r = qk.record();
  CHECK(r.desc.scale_type.value == CUDA_R_16F);
  const std::vector<LintFinding> findings = lint(r, qk_context());
  check_only(findings, lint_rule::scale_type, "desc");
  CHECK(findings.size() == 1);
  CHECK(findings[0].message ==
        "compute type CUBLAS_COMPUTE_32F takes scale type CUDA_R_32F or CUDA_C_32F, not CUDA_R_16F");
}

TEST_CASE("the documented scale types: fp16 compute takes an fp16 scale only, fp64 compute fp64", "[lint]") {
  CHECK(documented_scale_types(CUBLAS_COMPUTE_16F) == std::vector<cudaDataType_t>{CUDA_R_16F});
  CHECK(documented_scale_types(CUBLAS_COMPUTE_32F_FAST_TF32) == std::vector<cudaDataType_t>{CUDA_R_32F, CUDA_C_32F});
  CHECK(documented_scale_types(CUBLAS_COMPUTE_64F) == std::vector<cudaDataType_t>{CUDA_R_64F, CUDA_C_64F});
  CHECK(documented_scale_types(CUBLAS_COMPUTE_32I) == std::vector<cudaDataType_t>{CUDA_R_32I, CUDA_R_32F});

  LtMatmulDesc fp16_compute(CUBLAS_COMPUTE_16F, CUDA_R_32F);  // fp16 compute, fp32 alpha/beta
  QkDescriptors qk;
  set_desc(qk.log, fp16_compute.get(), CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);  // as qk.desc
  const MatmulRecord r = read_back("qk16", fp16_compute.get(), qk.a.get(), qk.b.get(), qk.c.get(), qk.d.get(),
                                   qk.preference.get(), nullptr, nullptr, {});
  check_only(lint(r, qk_context()), lint_rule::scale_type, "desc");
}

TEST_CASE("the dump shows one line per layout and marks the failed Sets", "[lint]") {
  const std::string clean = dump_text(QkDescriptors().record());
  INFO(clean);
  CHECK(contains(clean, "matmul qk\n"));
  CHECK(contains(clean, "  desc: compute CUBLAS_COMPUTE_32F scale CUDA_R_32F transa T transb N epilogue DEFAULT pointer mode HOST\n"));
  CHECK(contains(clean, "  A: CUDA_R_16F COL rows 64 cols 128 ld 64 batch 256 stride 8192\n"));
  CHECK(contains(clean, "  B: CUDA_R_16F COL rows 64 cols 32 ld 64 batch 256 stride 2048\n"));
  CHECK(contains(clean, "  D: CUDA_R_32F COL rows 128 cols 32 ld 128 batch 256 stride 4096\n"));
  CHECK(contains(clean, "  preference: max workspace bytes 33554432\n"));
  CHECK(contains(clean, "  sets: 11, failed 0\n"));
  CHECK(!contains(clean, "FAILED"));

  const std::string seed = dump_text(QkDescriptors(BatchPath::seed_raw_int).record());
  INFO(seed);
  CHECK(contains(seed, "  B: CUDA_R_16F COL rows 64 cols 32 ld 64 batch 256 stride 0\n"));
  CHECK(contains(seed, "  sets: 12, failed 2\n"));
  CHECK(contains(seed, "    layout B: BATCH_COUNT = 256 (4 bytes)\n"));
  CHECK(contains(seed, "  ! layout B: STRIDED_BATCH_OFFSET = 2048 (4 bytes; int64 expected) FAILED 7 CUBLAS_STATUS_INVALID_VALUE\n"));
}

TEST_CASE("an algorithm's configuration and heuristic result are read back when given", "[lint]") {
  const QkDescriptors qk;
  cublasLtMatmulHeuristicResult_t heuristic{};
  SetLog algo_sets;
  // An algorithm from cublasLtMatmulAlgoGetHeuristic needs a GPU; its config attributes do not.
  set_algo_config(algo_sets, heuristic.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 4);
  set_algo_config(algo_sets, heuristic.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_REDUCTION_SCHEME_INPLACE);
  set_algo_config(algo_sets, heuristic.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, 1);
  heuristic.workspaceSize = 4096;
  heuristic.wavesCount = 0.75f;
  heuristic.state = CUBLAS_STATUS_SUCCESS;
  const MatmulRecord r = qk.record(&heuristic.algo, &heuristic);
  REQUIRE(r.algo);
  CHECK(r.algo->splitk_num.value == 4);
  CHECK(r.algo->reduction_scheme.value == CUBLASLT_REDUCTION_SCHEME_INPLACE);
  CHECK(r.algo->cta_swizzling.value == 1);
  CHECK(r.algo->id.ok());
  REQUIRE(r.heuristic);
  CHECK(r.heuristic->workspace_size == 4096);
  const std::string text = dump_text(r);
  INFO(text);
  CHECK(contains(text, "split-k 4 reduction INPLACE cta swizzling 1"));
  CHECK(contains(text, "  heuristic: workspace 4096 bytes, waves 0.75, state CUBLAS_STATUS_SUCCESS\n"));
}

TEST_CASE("a failed Get is a set-status finding, and the dump and JSON show the field as unknown", "[lint]") {
  MatmulRecord r = QkDescriptors().record();
  r.b.ld.status = CUBLAS_STATUS_INVALID_VALUE;  // as if cuBLASLt had refused the read
  const std::vector<LintFinding> findings = lint(r, qk_context());
  check_only(findings, lint_rule::set_status, "B");
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].message == "layout B: LD read back failed, status 7 (CUBLAS_STATUS_INVALID_VALUE)");
  CHECK(layout_line(r.b) == "B: CUDA_R_16F COL rows 64 cols 32 ld <get failed: CUBLAS_STATUS_INVALID_VALUE> batch 256 stride 2048");
  CHECK(contains(json_text(record_json(r)), "\"ld\": null"));
}

TEST_CASE("moving a cuBLASLt owner transfers the object and leaves the source empty", "[lint]") {
  LtMatrixLayout first(CUDA_R_16F, 4, 4, 4);
  const cublasLtMatrixLayout_t object = first.get();
  LtMatrixLayout second(std::move(first));
  CHECK(first.get() == nullptr);
  CHECK(second.get() == object);
  LtMatrixLayout third(CUDA_R_32F, 2, 2, 2);
  third = std::move(second);
  CHECK(third.get() == object);
}

TEST_CASE("the JSON of a record and its findings is well formed", "[lint]") {
  const QkDescriptors qk(BatchPath::seed_raw_int);
  cublasLtMatmulHeuristicResult_t heuristic{};
  const MatmulRecord r = qk.record(&heuristic.algo, &heuristic);
  const std::string text = json_text(Json{{"record", record_json(r)}, {"findings", findings_json(lint(r, qk_context()))}});
  INFO(text);
  CHECK(contains(text, "\"strided_batch_offset\": 8192"));
  CHECK(contains(text, "\"compute_type\": \"CUBLAS_COMPUTE_32F\""));
  CHECK(contains(text, "\"attribute\": \"STRIDED_BATCH_OFFSET\""));
  CHECK(contains(text, "\"name\": \"CUBLAS_STATUS_INVALID_VALUE\""));
  CHECK(contains(text, "\"rule\": \"set-status\""));

  // scripts/setup installs python3; without it this check would pass having checked nothing.
  INFO("needs /usr/bin/python3 to parse the JSON");
  REQUIRE(access("/usr/bin/python3", X_OK) == 0);
  FILE* pipe = popen("/usr/bin/python3 -c 'import json,sys; json.load(sys.stdin)'", "w");
  REQUIRE(pipe);
  std::fwrite(text.data(), 1, text.size(), pipe);
  CHECK(pclose(pipe) == 0);
}

}  // namespace fc

#pragma once
// One configured cuBLASLt matmul, the one place every cuBLASLt call of the implementations
// goes through: its descriptors are built with the logging setter (stages/cublaslt), read back
// for reports, linted before each launch, and its algorithm chosen once.
//
// All layouts are column-major, as cuBLASLt's default order: an operand is `rows` x `cols`
// in storage (before any transpose) with leading dimension `ld`. A row-major [R x C] matrix
// of ours is a column-major [C x R] one with ld = C.
#include <cstdint>
#include <optional>
#include <string>

#include "stages/cublaslt/lt_handles.h"
#include "stages/cublaslt/lt_setter.h"
#include "stages/descriptor_report.h"

namespace fc {

struct LtOperand {
  DType dtype = DType::f16;
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::int64_t batch = 1, batch_stride = 0;
};

struct GemmConfig {
  std::string name;
  LtOperand a, b, c;  // D has C's layout
  bool transpose_a = false, transpose_b = false;
  std::size_t max_workspace = std::size_t{32} << 20;
  // Fault injection (attr-int32): the 64-bit batch attributes set from 4-byte ints and
  // their status ignored, as the seed reports did.
  bool int32_batch_attributes = false;
};

class LtGemm {
 public:
  explicit LtGemm(GemmConfig config);  // builds the descriptors; needs no GPU

  const GemmConfig& config() const { return config_; }
  cublasLtMatmulDesc_t desc() const { return desc_.get(); }
  cublasLtMatrixLayout_t a() const { return a_.get(); }
  cublasLtMatrixLayout_t b() const { return b_.get(); }
  cublasLtMatrixLayout_t c() const { return c_.get(); }
  cublasLtMatmulPreference_t preference() const { return preference_.get(); }
  const SetLog& log() const { return log_; }

  bool has_algorithm() const { return algo_.has_value(); }
  void choose_by_heuristic(const LtHandle& handle);
  void choose(const cublasLtMatmulAlgo_t& algo, const cublasLtMatmulHeuristicResult_t& heuristic);

  // The descriptors as cuBLASLt holds them, read back once (they do not change after the
  // constructor; choosing an algorithm reads them again).
  const MatmulRecord& record() const;

  // Lints against what the harness allocated; reports (when asked) and launches only if clean.
  // Returns whether it launched.
  bool lint_and_run(const LtHandle& handle, const LintContext& context, std::size_t stage,
                    std::vector<DescriptorReport>* reports, float alpha, const void* a, const void* b, float beta,
                    const void* c, void* d, void* workspace, cudaStream_t stream) const;
  // Launches with no lint and no report (timing loops).
  void run(const LtHandle& handle, float alpha, const void* a, const void* b, float beta, const void* c, void* d,
           void* workspace, cudaStream_t stream) const;

 private:
  LtMatrixLayout make_layout(const std::string& operand, const LtOperand& o);

  GemmConfig config_;
  SetLog log_;
  LtMatmulDesc desc_;
  LtMatrixLayout a_, b_, c_;
  LtMatmulPreference preference_;
  std::optional<cublasLtMatmulAlgo_t> algo_;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  mutable std::optional<MatmulRecord> record_;
};

}  // namespace fc

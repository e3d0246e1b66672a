#pragma once
// Choosing a cuBLASLt algorithm by timing: every algorithm cublasLtMatmulAlgoGetIds offers
// for the matmul's types, each of its tile shapes, and split-K numbers 1, 4, 8, 16 and 32
// where it supports split-K reduced in fp32; the candidates cublasLtMatmulAlgoCheck accepts within the
// workspace are timed on the real operands and the fastest is kept.
#include <string>

#include "kernels/common/lt_gemm.h"

namespace fc {

struct MatmulOperands {
  float alpha = 1, beta = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

struct TuningResult {
  int candidates = 0;  // timed
  int split_k = 1;     // of the winner
  float milliseconds = 0;
};

// Leaves `gemm` with the fastest algorithm. Throws fc::Error when no candidate runs.
TuningResult tune_split_k(const LtHandle& handle, LtGemm& gemm, const MatmulOperands& operands, cudaStream_t stream);

}  // namespace fc

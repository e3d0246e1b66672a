#include "kernels/cublaslt_splitk/split_k_tuning.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "stages/cublaslt/lt_types.h"
#include "stages/device_memory.h"

namespace fc {
namespace {

constexpr int kSplitK[] = {1, 4, 8, 16, 32};
constexpr int kMaxIds = 64;
constexpr int kMaxCandidates = 96;

template <class T>
T capability(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T value{};
  std::size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &value, sizeof value, &written) != CUBLAS_STATUS_SUCCESS) return T{};
  return value;
}

std::vector<std::uint32_t> tile_ids(const cublasLtMatmulAlgo_t& algo) {
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes == 0) {
    return {CUBLASLT_MATMUL_TILE_UNDEFINED};
  }
  std::vector<std::uint32_t> ids(bytes / sizeof(std::uint32_t));
  std::size_t written = 0;
  FC_CUBLAS(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, ids.data(), bytes, &written));
  return ids;
}

// Split-K partial sums are reduced in the compute type (fp32), the arithmetic the stages
// declare; INPLACE and OUTPUT_TYPE reductions sum them in the output format (fp16 for P.V),
// a coarser arithmetic whose error the declared bound does not cover, so they are not
// candidates.
bool reduces_in_compute_type(const cublasLtMatmulAlgo_t& algo) {
  const std::uint32_t mask = capability<std::uint32_t>(algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
  return (mask & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) != 0;
}

struct Candidate {
  cublasLtMatmulAlgo_t algo;
  cublasLtMatmulHeuristicResult_t check;
  int split_k;
};

std::vector<Candidate> candidates(const LtHandle& handle, const LtGemm& gemm, std::size_t workspace_bytes) {
  const GemmConfig& c = gemm.config();
  const cudaDataType_t a = *cuda_data_type(c.a.dtype), b = *cuda_data_type(c.b.dtype), d = *cuda_data_type(c.c.dtype);
  int ids[kMaxIds];
  int count = 0;
  FC_CUBLAS(cublasLtMatmulAlgoGetIds(handle.get(), CUBLAS_COMPUTE_32F, CUDA_R_32F, a, b, d, d, kMaxIds, ids, &count));
  std::vector<Candidate> found;
  SetLog scratch;  // the tuning's own settings; the winner's config is read back in the record
  for (int i = 0; i < count && static_cast<int>(found.size()) < kMaxCandidates; ++i) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(handle.get(), CUBLAS_COMPUTE_32F, CUDA_R_32F, a, b, d, d, ids[i], &algo) !=
        CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    const bool split_k_support = capability<std::int32_t>(algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0 &&
                                 reduces_in_compute_type(algo);
    for (std::uint32_t tile : tile_ids(algo)) {
      set_algo_config_raw(scratch, algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
      for (int split : kSplitK) {
        if (split > 1 && !split_k_support) continue;
        const std::uint32_t n = static_cast<std::uint32_t>(split);
        const std::uint32_t scheme = static_cast<std::uint32_t>(split > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                                                                          : CUBLASLT_REDUCTION_SCHEME_NONE);
        set_algo_config_raw(scratch, algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &n, sizeof n);
        set_algo_config_raw(scratch, algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme);
        cublasLtMatmulHeuristicResult_t check{};
        if (cublasLtMatmulAlgoCheck(handle.get(), gemm.desc(), gemm.a(), gemm.b(), gemm.c(), gemm.c(), &algo, &check) !=
                CUBLAS_STATUS_SUCCESS ||
            check.workspaceSize > workspace_bytes) {
          continue;
        }
        found.push_back({algo, check, split});
        if (static_cast<int>(found.size()) >= kMaxCandidates) break;
      }
      scratch.clear();
      if (static_cast<int>(found.size()) >= kMaxCandidates) break;
    }
  }
  return found;
}

}  // namespace

TuningResult tune_split_k(const LtHandle& handle, LtGemm& gemm, const MatmulOperands& o, cudaStream_t stream) {
  const std::vector<Candidate> all = candidates(handle, gemm, o.workspace_bytes);
  TuningResult result;
  const Candidate* best = nullptr;
  CudaEvent start, stop;
  for (const Candidate& c : all) {
    gemm.choose(c.algo, c.check);
    // A candidate that fails to launch is skipped; the status is checked, not ignored.
    if (cublasLtMatmul(handle.get(), gemm.desc(), &o.alpha, o.a, gemm.a(), o.b, gemm.b(), &o.beta, o.c, gemm.c(), o.d,
                       gemm.c(), &c.algo, o.workspace, c.check.workspaceSize, stream) != CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    start.record(stream);
    for (int r = 0; r < 3; ++r) gemm.run(handle, o.alpha, o.a, o.b, o.beta, o.c, o.d, o.workspace, stream);
    stop.record(stream);
    const float ms = stop.since(start) / 3;
    ++result.candidates;
    if (!best || ms < result.milliseconds) {
      best = &c;
      result.milliseconds = ms;
      result.split_k = c.split_k;
    }
  }
  if (!best) throw Error("cuBLASLt offered no algorithm that runs " + gemm.config().name);
  gemm.choose(best->algo, best->check);
  return result;
}

}  // namespace fc

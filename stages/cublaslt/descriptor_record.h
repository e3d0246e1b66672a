#pragma once
// What cuBLASLt really holds for one matmul, read back with the Get functions after every Set,
// plus the log of those Sets. A Get that fails is recorded beside its field, never thrown, so
// a broken descriptor can still be dumped and linted.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stages/cublaslt/lt_setter.h"

namespace fc {

// One attribute as read back; `value` is meaningful only when ok().
template <class T>
struct ReadBack {
  T value{};
  cublasStatus_t status = CUBLAS_STATUS_NOT_INITIALIZED;
  bool ok() const { return status == CUBLAS_STATUS_SUCCESS; }
};

struct LayoutRecord {
  std::string operand;  // "A", "B", "C", "D"
  ReadBack<cudaDataType_t> type;
  ReadBack<cublasLtOrder_t> order;
  ReadBack<std::uint64_t> rows;
  ReadBack<std::uint64_t> cols;
  ReadBack<std::int64_t> ld;
  ReadBack<std::int32_t> batch_count;
  ReadBack<std::int64_t> strided_batch_offset;  // elements
};

struct MatmulDescRecord {
  ReadBack<cublasComputeType_t> compute_type;
  ReadBack<cudaDataType_t> scale_type;
  ReadBack<cublasOperation_t> transa;
  ReadBack<cublasOperation_t> transb;
  ReadBack<cublasLtEpilogue_t> epilogue;
  ReadBack<cublasLtPointerMode_t> pointer_mode;
};

struct PreferenceRecord {
  ReadBack<std::uint64_t> max_workspace_bytes;
};

// An algorithm's configuration; algorithms come from a handle, hence from a GPU.
struct AlgoRecord {
  ReadBack<std::int32_t> id;
  ReadBack<std::uint32_t> tile_id;    // cublasLtMatmulTile_t
  ReadBack<std::uint32_t> stages_id;  // cublasLtMatmulStages_t
  ReadBack<std::int32_t> splitk_num;
  ReadBack<cublasLtReductionScheme_t> reduction_scheme;
  ReadBack<std::uint32_t> cta_swizzling;
  ReadBack<std::uint32_t> custom_option;
};

struct HeuristicRecord {
  std::size_t workspace_size = 0;
  float waves_count = 0;
  cublasStatus_t state = CUBLAS_STATUS_SUCCESS;
};

struct MatmulRecord {
  std::string name;  // "qk": what the harness calls this matmul
  MatmulDescRecord desc;
  LayoutRecord a, b, c, d;
  PreferenceRecord preference;
  std::optional<AlgoRecord> algo;
  std::optional<HeuristicRecord> heuristic;
  SetLog sets;
};

// `algo` and `heuristic` may be null (nothing chosen yet, or no GPU); every other handle must
// be a live descriptor. C and D may be the same layout.
MatmulRecord read_back(std::string name, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                       cublasLtMatmulPreference_t preference, const cublasLtMatmulAlgo_t* algo,
                       const cublasLtMatmulHeuristicResult_t* heuristic, SetLog sets);

// A Get that did not succeed: where, which attribute, the status.
struct FailedRead {
  std::string object;     // "layout B", "matmul desc", "preference", "algo config"
  std::string operand;    // as in SetEntry
  std::string attribute;  // "LD"
  cublasStatus_t status;
  std::string name() const { return object + ": " + attribute; }
};

std::vector<FailedRead> failed_reads(const MatmulRecord& record);

}  // namespace fc

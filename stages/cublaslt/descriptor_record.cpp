#include "stages/cublaslt/descriptor_record.h"

#include <utility>

#include "core/error.h"

namespace fc {
namespace {

// Reads one attribute into `Stored`, its type as documented in cublasLt.h, then converts it to
// the record's field type.
template <class Stored, class T, class Get>
ReadBack<T> read_as(Get get) {
  Stored raw{};
  std::size_t written = 0;
  ReadBack<T> r;
  r.status = get(&raw, sizeof raw, &written);
  if (r.ok()) r.value = static_cast<T>(raw);
  return r;
}

LayoutRecord read_layout(const std::string& operand, cublasLtMatrixLayout_t layout) {
  auto attribute = [layout](cublasLtMatrixLayoutAttribute_t attr) {
    return [layout, attr](void* buf, std::size_t size, std::size_t* written) {
      return cublasLtMatrixLayoutGetAttribute(layout, attr, buf, size, written);
    };
  };
  LayoutRecord r;
  r.operand = operand;
  r.type = read_as<std::uint32_t, cudaDataType_t>(attribute(CUBLASLT_MATRIX_LAYOUT_TYPE));
  r.order = read_as<std::int32_t, cublasLtOrder_t>(attribute(CUBLASLT_MATRIX_LAYOUT_ORDER));
  r.rows = read_as<std::uint64_t, std::uint64_t>(attribute(CUBLASLT_MATRIX_LAYOUT_ROWS));
  r.cols = read_as<std::uint64_t, std::uint64_t>(attribute(CUBLASLT_MATRIX_LAYOUT_COLS));
  r.ld = read_as<std::int64_t, std::int64_t>(attribute(CUBLASLT_MATRIX_LAYOUT_LD));
  r.batch_count = read_as<std::int32_t, std::int32_t>(attribute(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT));
  r.strided_batch_offset =
      read_as<std::int64_t, std::int64_t>(attribute(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET));
  return r;
}

MatmulDescRecord read_desc(cublasLtMatmulDesc_t desc) {
  auto attribute = [desc](cublasLtMatmulDescAttributes_t attr) {
    return [desc, attr](void* buf, std::size_t size, std::size_t* written) {
      return cublasLtMatmulDescGetAttribute(desc, attr, buf, size, written);
    };
  };
  MatmulDescRecord r;
  r.compute_type = read_as<std::int32_t, cublasComputeType_t>(attribute(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE));
  r.scale_type = read_as<std::int32_t, cudaDataType_t>(attribute(CUBLASLT_MATMUL_DESC_SCALE_TYPE));
  r.transa = read_as<std::int32_t, cublasOperation_t>(attribute(CUBLASLT_MATMUL_DESC_TRANSA));
  r.transb = read_as<std::int32_t, cublasOperation_t>(attribute(CUBLASLT_MATMUL_DESC_TRANSB));
  r.epilogue = read_as<std::uint32_t, cublasLtEpilogue_t>(attribute(CUBLASLT_MATMUL_DESC_EPILOGUE));
  r.pointer_mode =
      read_as<std::int32_t, cublasLtPointerMode_t>(attribute(CUBLASLT_MATMUL_DESC_POINTER_MODE));
  return r;
}

PreferenceRecord read_preference(cublasLtMatmulPreference_t preference) {
  PreferenceRecord r;
  r.max_workspace_bytes = read_as<std::uint64_t, std::uint64_t>(
      [preference](void* buf, std::size_t size, std::size_t* written) {
        return cublasLtMatmulPreferenceGetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    buf, size, written);
      });
  return r;
}

AlgoRecord read_algo(const cublasLtMatmulAlgo_t& algo) {
  auto attribute = [&algo](cublasLtMatmulAlgoConfigAttributes_t attr) {
    return [&algo, attr](void* buf, std::size_t size, std::size_t* written) {
      return cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, buf, size, written);
    };
  };
  AlgoRecord r;
  r.id = read_as<std::int32_t, std::int32_t>(attribute(CUBLASLT_ALGO_CONFIG_ID));
  r.tile_id = read_as<std::uint32_t, std::uint32_t>(attribute(CUBLASLT_ALGO_CONFIG_TILE_ID));
  r.stages_id = read_as<std::uint32_t, std::uint32_t>(attribute(CUBLASLT_ALGO_CONFIG_STAGES_ID));
  r.splitk_num = read_as<std::int32_t, std::int32_t>(attribute(CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
  r.reduction_scheme = read_as<std::uint32_t, cublasLtReductionScheme_t>(
      attribute(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
  r.cta_swizzling = read_as<std::uint32_t, std::uint32_t>(attribute(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
  r.custom_option = read_as<std::uint32_t, std::uint32_t>(attribute(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
  return r;
}

void require(const void* handle, const std::string& record, const char* what) {
  if (!handle) throw Error("read_back(" + record + "): " + what + " is null");
}

}  // namespace

MatmulRecord read_back(std::string name, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                       cublasLtMatmulPreference_t preference, const cublasLtMatmulAlgo_t* algo,
                       const cublasLtMatmulHeuristicResult_t* heuristic, SetLog sets) {
  require(desc, name, "the matmul descriptor");
  require(a, name, "layout A");
  require(b, name, "layout B");
  require(c, name, "layout C");
  require(d, name, "layout D");
  require(preference, name, "the preference");
  MatmulRecord r;
  r.name = std::move(name);
  r.desc = read_desc(desc);
  r.a = read_layout("A", a);
  r.b = read_layout("B", b);
  r.c = read_layout("C", c);
  r.d = read_layout("D", d);
  r.preference = read_preference(preference);
  if (algo) r.algo = read_algo(*algo);
  if (heuristic) r.heuristic = HeuristicRecord{heuristic->workspaceSize, heuristic->wavesCount, heuristic->state};
  r.sets = std::move(sets);
  return r;
}

std::vector<FailedRead> failed_reads(const MatmulRecord& record) {
  std::vector<FailedRead> failed;
  auto check = [&failed](const std::string& object, const std::string& operand, const char* attribute,
                         cublasStatus_t status) {
    if (status != CUBLAS_STATUS_SUCCESS) failed.push_back({object, operand, attribute, status});
  };
  const MatmulDescRecord& m = record.desc;
  check("matmul desc", "desc", "COMPUTE_TYPE", m.compute_type.status);
  check("matmul desc", "desc", "SCALE_TYPE", m.scale_type.status);
  check("matmul desc", "desc", "TRANSA", m.transa.status);
  check("matmul desc", "desc", "TRANSB", m.transb.status);
  check("matmul desc", "desc", "EPILOGUE", m.epilogue.status);
  check("matmul desc", "desc", "POINTER_MODE", m.pointer_mode.status);
  for (const LayoutRecord* l : {&record.a, &record.b, &record.c, &record.d}) {
    const std::string object = "layout " + l->operand;
    check(object, l->operand, "TYPE", l->type.status);
    check(object, l->operand, "ORDER", l->order.status);
    check(object, l->operand, "ROWS", l->rows.status);
    check(object, l->operand, "COLS", l->cols.status);
    check(object, l->operand, "LD", l->ld.status);
    check(object, l->operand, "BATCH_COUNT", l->batch_count.status);
    check(object, l->operand, "STRIDED_BATCH_OFFSET", l->strided_batch_offset.status);
  }
  check("preference", "preference", "MAX_WORKSPACE_BYTES", record.preference.max_workspace_bytes.status);
  if (record.algo) {
    const AlgoRecord& g = *record.algo;
    check("algo config", "algo", "ID", g.id.status);
    check("algo config", "algo", "TILE_ID", g.tile_id.status);
    check("algo config", "algo", "STAGES_ID", g.stages_id.status);
    check("algo config", "algo", "SPLITK_NUM", g.splitk_num.status);
    check("algo config", "algo", "REDUCTION_SCHEME", g.reduction_scheme.status);
    check("algo config", "algo", "CTA_SWIZZLING", g.cta_swizzling.status);
    check("algo config", "algo", "CUSTOM_OPTION", g.custom_option.status);
  }
  return failed;
}

}  // namespace fc

#pragma once
// The one place cuBLASLt attributes are set. Every Set is logged with what was given (bytes and
// size) and what cuBLASLt answered, so a descriptor can be explained after the fact.
//
// Two paths:
//  - set_layout / set_desc / set_preference / set_algo_config take the value as an integer and
//    pass it in the attribute's documented type (lt_attributes.h), so the size is always right.
//    A value that does not fit that type, or a status other than success, throws fc::Error.
//  - the *_raw functions pass the bytes and size exactly as given and never throw: they exist
//    for fault injection (a deliberately broken code path, like the seed reports' 4-byte
//    STRIDED_BATCH_OFFSET). Their callers may ignore the status; the log keeps it.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stages/cublaslt/lt_attributes.h"

namespace fc {

struct SetEntry {
  std::string object;     // "layout B", "matmul desc", "preference", "algo config"
  std::string operand;    // "B" for a layout; "desc", "preference", "algo" otherwise
  std::string attribute;  // "STRIDED_BATCH_OFFSET"
  AttributeType expected = AttributeType::unknown;  // documented type of the attribute
  std::vector<unsigned char> bytes;                 // as given; empty for a null pointer
  std::size_t size = 0;                             // size given
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;

  std::string name() const { return object + ": " + attribute; }  // "layout B: LD"
  bool ok() const { return status == CUBLAS_STATUS_SUCCESS; }
};

using SetLog = std::vector<SetEntry>;

// `operand` names the matrix: "A", "B", "C" or "D".
cublasStatus_t set_layout(SetLog& log, const std::string& operand, cublasLtMatrixLayout_t layout,
                          cublasLtMatrixLayoutAttribute_t attr, std::int64_t value);
cublasStatus_t set_desc(SetLog& log, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                        std::int64_t value);
cublasStatus_t set_preference(SetLog& log, cublasLtMatmulPreference_t preference,
                              cublasLtMatmulPreferenceAttributes_t attr, std::int64_t value);
cublasStatus_t set_algo_config(SetLog& log, cublasLtMatmulAlgo_t& algo,
                               cublasLtMatmulAlgoConfigAttributes_t attr, std::int64_t value);

cublasStatus_t set_layout_raw(SetLog& log, const std::string& operand, cublasLtMatrixLayout_t layout,
                              cublasLtMatrixLayoutAttribute_t attr, const void* buf, std::size_t size);
cublasStatus_t set_desc_raw(SetLog& log, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                            const void* buf, std::size_t size);
cublasStatus_t set_preference_raw(SetLog& log, cublasLtMatmulPreference_t preference,
                                  cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                  std::size_t size);
cublasStatus_t set_algo_config_raw(SetLog& log, cublasLtMatmulAlgo_t& algo,
                                   cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf,
                                   std::size_t size);

}  // namespace fc

#pragma once
// The name and documented C type of every cuBLASLt attribute we set or read back. The types are
// those written beside each attribute in cublasLt.h; a Set whose size differs from the
// documented type's size is refused by cuBLASLt with CUBLAS_STATUS_INVALID_VALUE, and nothing
// else tells the caller (the attribute keeps its previous value).
#include <cublasLt.h>

#include <cstddef>

namespace fc {

enum class AttributeType { int8, int32, uint16, uint32, int64, uint64, float32, pointer, unknown };

struct AttributeInfo {
  const char* name;  // the enumerator without its prefix: "STRIDED_BATCH_OFFSET"
  AttributeType type;
};

AttributeInfo attribute_info(cublasLtMatrixLayoutAttribute_t attr);
AttributeInfo attribute_info(cublasLtMatmulDescAttributes_t attr);
AttributeInfo attribute_info(cublasLtMatmulPreferenceAttributes_t attr);
AttributeInfo attribute_info(cublasLtMatmulAlgoConfigAttributes_t attr);

std::size_t attribute_type_size(AttributeType t);  // 0 for unknown
const char* attribute_type_name(AttributeType t);  // "int64", "uint32", "pointer", ...
bool attribute_type_is_signed(AttributeType t);

}  // namespace fc

#include "stages/cublaslt/lt_setter.h"

#include <limits>
#include <type_traits>

#include "core/check.h"
#include "core/error.h"

namespace fc {
namespace {

SetEntry make_entry(std::string object, std::string operand, const AttributeInfo& info,
                    const void* buf, std::size_t size, cublasStatus_t status) {
  SetEntry e;
  e.object = std::move(object);
  e.operand = std::move(operand);
  e.attribute = info.name;
  e.expected = info.type;
  if (buf) {
    const auto* p = static_cast<const unsigned char*>(buf);
    e.bytes.assign(p, p + size);
  }
  e.size = size;
  e.status = status;
  return e;
}

template <class T>
T narrow(std::int64_t value, const std::string& what, AttributeType type) {
  bool fits;
  if constexpr (std::is_signed_v<T>) {
    fits = value >= std::numeric_limits<T>::min() && value <= std::numeric_limits<T>::max();
  } else {
    fits = value >= 0 && static_cast<std::uint64_t>(value) <= std::numeric_limits<T>::max();
  }
  if (!fits) {
    throw Error(what + " = " + std::to_string(value) + " does not fit its documented type " +
                attribute_type_name(type));
  }
  return static_cast<T>(value);
}

// Converts `value` to the attribute's documented type, sets it through `raw` (which logs), and
// checks the status as FC_CUBLAS does, naming the attribute instead of the generic call text.
template <class Raw>
cublasStatus_t set_as_documented(SetLog& log, const char* api, const std::string& object,
                                 const AttributeInfo& info, std::int64_t value, Raw raw) {
  const std::string what = object + ": " + info.name;
  auto send = [&](auto typed) { return raw(&typed, sizeof typed); };
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  switch (info.type) {
    case AttributeType::int8: status = send(narrow<std::int8_t>(value, what, info.type)); break;
    case AttributeType::int32: status = send(narrow<std::int32_t>(value, what, info.type)); break;
    case AttributeType::uint16: status = send(narrow<std::uint16_t>(value, what, info.type)); break;
    case AttributeType::uint32: status = send(narrow<std::uint32_t>(value, what, info.type)); break;
    case AttributeType::int64: status = send(value); break;
    case AttributeType::uint64: status = send(narrow<std::uint64_t>(value, what, info.type)); break;
    case AttributeType::float32:
    case AttributeType::pointer:
    case AttributeType::unknown:
      throw Error(what + " is not an integer attribute (documented type " +
                  attribute_type_name(info.type) + "); set it through the raw setter");
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    const std::string call = std::string(api) + "(" + log.back().name() + ", " +
                             std::to_string(log.back().size) + " bytes)";
    detail::fail_cublas(status, call.c_str(), __FILE__, __LINE__);
  }
  return status;
}

}  // namespace

cublasStatus_t set_layout_raw(SetLog& log, const std::string& operand, cublasLtMatrixLayout_t layout,
                              cublasLtMatrixLayoutAttribute_t attr, const void* buf, std::size_t size) {
  const cublasStatus_t status = cublasLtMatrixLayoutSetAttribute(layout, attr, buf, size);
  log.push_back(make_entry("layout " + operand, operand, attribute_info(attr), buf, size, status));
  return status;
}

cublasStatus_t set_desc_raw(SetLog& log, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                            const void* buf, std::size_t size) {
  const cublasStatus_t status = cublasLtMatmulDescSetAttribute(desc, attr, buf, size);
  log.push_back(make_entry("matmul desc", "desc", attribute_info(attr), buf, size, status));
  return status;
}

cublasStatus_t set_preference_raw(SetLog& log, cublasLtMatmulPreference_t preference,
                                  cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                  std::size_t size) {
  const cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(preference, attr, buf, size);
  log.push_back(make_entry("preference", "preference", attribute_info(attr), buf, size, status));
  return status;
}

cublasStatus_t set_algo_config_raw(SetLog& log, cublasLtMatmulAlgo_t& algo,
                                   cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf,
                                   std::size_t size) {
  const cublasStatus_t status = cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, buf, size);
  log.push_back(make_entry("algo config", "algo", attribute_info(attr), buf, size, status));
  return status;
}

cublasStatus_t set_layout(SetLog& log, const std::string& operand, cublasLtMatrixLayout_t layout,
                          cublasLtMatrixLayoutAttribute_t attr, std::int64_t value) {
  return set_as_documented(log, "cublasLtMatrixLayoutSetAttribute", "layout " + operand,
                           attribute_info(attr), value, [&](const void* buf, std::size_t size) {
                             return set_layout_raw(log, operand, layout, attr, buf, size);
                           });
}

cublasStatus_t set_desc(SetLog& log, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                        std::int64_t value) {
  return set_as_documented(log, "cublasLtMatmulDescSetAttribute", "matmul desc", attribute_info(attr),
                           value, [&](const void* buf, std::size_t size) {
                             return set_desc_raw(log, desc, attr, buf, size);
                           });
}

cublasStatus_t set_preference(SetLog& log, cublasLtMatmulPreference_t preference,
                              cublasLtMatmulPreferenceAttributes_t attr, std::int64_t value) {
  return set_as_documented(log, "cublasLtMatmulPreferenceSetAttribute", "preference",
                           attribute_info(attr), value, [&](const void* buf, std::size_t size) {
                             return set_preference_raw(log, preference, attr, buf, size);
                           });
}

cublasStatus_t set_algo_config(SetLog& log, cublasLtMatmulAlgo_t& algo,
                               cublasLtMatmulAlgoConfigAttributes_t attr, std::int64_t value) {
  return set_as_documented(log, "cublasLtMatmulAlgoConfigSetAttribute", "algo config",
                           attribute_info(attr), value, [&](const void* buf, std::size_t size) {
                             return set_algo_config_raw(log, algo, attr, buf, size);
                           });
}

}  // namespace fc

#include "core/json.h"

#include <cmath>

namespace fc {

Json json_number(double value) {
  if (std::isfinite(value)) return value;
  return Json{{"nonfinite", std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf"}};
}

std::string json_text(const Json& document) {
  return document.dump(2, ' ', false, Json::error_handler_t::replace);
}

void write_json_document(std::ostream& out, const Json& document) { out << json_text(document) << "\n"; }

}  // namespace fc

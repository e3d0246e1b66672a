#pragma once
// JSON through nlohmann-json, with keys kept in the order they are set. JSON has no NaN or
// infinity, so every double goes through json_number: a finite value is a JSON number, a
// non-finite one the object {"nonfinite": "nan"} ("inf", "-inf"), which no field of ours
// holds otherwise: a reader tells it from a number, a string and null (docs/json-output.md).
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace fc {

using Json = nlohmann::ordered_json;

Json json_number(double value);

// Indented by two spaces, a newline at the end; bytes that are not UTF-8 become U+FFFD.
void write_json_document(std::ostream& out, const Json& document);
std::string json_text(const Json& document);

}  // namespace fc

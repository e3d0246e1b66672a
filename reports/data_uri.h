#pragma once
// data: URIs, so that a report carries its images inside the HTML (no file beside it, no
// network).
#include <string>

namespace fc {

std::string base64(const std::string& bytes);
std::string data_uri(const std::string& mime, const std::string& bytes);  // "data:image/png;base64,..."

}  // namespace fc

#pragma once
// Text into HTML: escaping for element content and attribute values alike.
#include <string>

namespace fc {

std::string html_escape(const std::string& s);

}  // namespace fc

#pragma once
// Internal to harness/io: file-supplied text (entry names, header text) made safe for an
// error message.
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace fc {

// Names and header text come from the file: escape them so a message stays one short line.
inline std::string printable(std::string_view s, std::size_t max_length = 80) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max_length; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  if (s.size() > max_length) out += "...";
  return out;
}

}  // namespace fc

#pragma once
// Writing a report file whole or not at all: into a temporary name beside it, renamed when
// complete. An unwritable path is an fc::Error naming it.
#include <functional>
#include <ostream>
#include <string>

namespace fc {

void write_text_file(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace fc

#include "harness/io/text_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace fc {

void write_text_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw file_error(path, std::string("cannot write (") + std::strerror(errno) + ")");
    write(out);
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      throw file_error(path, "write failed");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    throw file_error(path, "cannot write (" + why + ")");
  }
}

}  // namespace fc

#include "harness/io/text_output.h"

#include <fstream>

#include "core/error.h"
#include "harness/io/staged_file.h"

namespace fc {

void write_text_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  StagedFile staged(path);
  {
    std::ofstream out(staged.temp_path(), std::ios::binary | std::ios::trunc);
    if (!out) throw file_error(path, "cannot write");
    write(out);
    out.flush();
    if (!out) throw file_error(path, "write failed");
  }
  staged.commit();
}

}  // namespace fc

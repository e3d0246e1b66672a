#include "core/temporary_folder.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace fc {

namespace fs = std::filesystem;

TemporaryFolder::TemporaryFolder(const std::string& prefix, const std::string& what) {
  std::error_code failed;
  const fs::path base = fs::temp_directory_path(failed);
  if (failed) throw Error(what + ": no temporary directory: " + failed.message());
  std::string pattern = (base / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(pattern.data())) {
    throw Error(what + ": cannot make a temporary folder in " + base.string() + ": " + std::strerror(errno));
  }
  path_ = pattern;
}

TemporaryFolder::~TemporaryFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

}  // namespace fc

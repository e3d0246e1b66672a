#pragma once
// A fresh folder under the system's temporary directory, removed with everything in it when
// its owner goes.
#include <filesystem>
#include <string>

namespace fc {

class TemporaryFolder {
 public:
  // `prefix`: the folder's name before a unique suffix; `what`: who needs it, for the error.
  TemporaryFolder(const std::string& prefix, const std::string& what);
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace fc

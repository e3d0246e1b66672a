#include "harness/io/staged_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace fc {

StagedFile::StagedFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw Error("cannot write a file to an empty path");
  static std::atomic<unsigned> counter{0};
  temp_path_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw file_error(path_, std::string("cannot write (") + std::strerror(errno) + ")");
  ::close(fd);
}

StagedFile::~StagedFile() {
  if (!committed_) std::remove(temp_path_.c_str());
}

void StagedFile::commit() {
  // Data on disk before the name points at it: a crash never leaves a truncated file at path.
  const int fd = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw file_error(path_, "cannot write (sync of " + temp_path_ + ": " + std::strerror(error) + ")");
  }
  ::close(fd);
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    throw file_error(path_, "cannot write (rename from " + temp_path_ + ": " + std::strerror(errno) + ")");
  }
  committed_ = true;
}

void check_output_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw file_error(path, "cannot write: it is a folder");
  StagedFile probe(path);  // removed again on the way out
}

}  // namespace fc

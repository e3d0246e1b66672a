#pragma once
// An output file written whole or not at all: staged under a temporary name beside its path
// ("PATH.tmp-PID-N") and put in place by commit() (data synced to disk, then renamed). If
// the owner is destroyed before commit() (a failed write, an exception), the temporary file
// is removed, so a half-written file never exists under PATH. A process stopped by SIGINT,
// SIGTERM or SIGHUP (where they were not ignored) removes its live temporary files on the way
// out too, then dies of the signal as it would have.
#include <string>

namespace fc {

class StagedFile {
 public:
  // Creates the (empty) temporary file; an fc::Error naming `path` with the OS's reason if
  // it cannot, or if `path` is a folder, a guarded input, or exists and is neither a regular
  // file, a character device nor a fifo. A character device or fifo (/dev/stdout, /dev/null)
  // is written in place: temp_path() is path() and nothing is staged or renamed.
  explicit StagedFile(std::string path);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  const std::string& target() const { return target_; }  // path(), or the file its link leads to
  bool committed() const { return committed_; }

  // The writer has closed the temporary file: sync it and rename it onto path().
  void commit();

 private:
  std::string path_, target_, temp_path_;
  bool committed_ = false;
  bool in_place_ = false;  // a character device or fifo (/dev/stdout): written straight, not staged
  int slot_ = -1;  // its entry in the table of files a signal removes (-1: none)
};

// Refuses, before any work, a path no file could be written to: the fc::Error writing it
// would give at the end (its folder missing or read-only, the path a folder, a device or an
// input of this process), an empty path, or one an earlier call of this process named (two
// outputs of one command on one path). Creates and removes the temporary file a writer would.
void check_output_path(const std::string& path);

// A file this process reads (the readers note theirs): once guard_input_files() was called
// (the command line does, first), no StagedFile is written over it.
void note_input_file(const std::string& path);
void guard_input_files();

}  // namespace fc

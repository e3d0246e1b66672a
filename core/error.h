#pragma once
// The one error type of the project. Whatever throws it means "usage, input or environment
// problem": the CLI prints its message as one line on stderr and exits with code 2.
// The message says what went wrong and where (a file, a dataset, an option, a call site).
#include <stdexcept>
#include <string>

namespace fc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A message as one line: a newline, a carriage return, a tab or another control character in
// it (a file name can hold any of them) written as an escape, so that every error stays one
// line on stderr.
std::string one_line(const std::string& message);

// "PATH: what" -- the shape of every message about a file.
inline Error file_error(const std::string& path, const std::string& what) {
  return Error(path + ": " + what);
}

}  // namespace fc

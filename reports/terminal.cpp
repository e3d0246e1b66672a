#include "reports/terminal.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

namespace fc {
namespace {

// An ostream that writes nowhere: a null buffer puts the stream in a failed state, which
// ostream operators then skip cheaply.
class NullStream : public std::ostream {
 public:
  NullStream() : std::ostream(nullptr) {}
};

}  // namespace

bool colour_wanted(bool stdout_is_terminal, const char* no_color) {
  return stdout_is_terminal && (no_color == nullptr || no_color[0] == '\0');
}

bool colour_stdout() { return colour_wanted(::isatty(STDOUT_FILENO) == 1, std::getenv("NO_COLOR")); }

std::string painted(const std::string& text, Tone tone, bool colour) {
  if (!colour) return text;
  const char* code = tone == Tone::good ? "\033[32m" : tone == Tone::bad ? "\033[1;31m" : "\033[33m";
  return code + text + "\033[0m";
}

std::string painted_verdict(const std::string& word, bool colour) {
  if (word == "pass" || word == "ok" || word == "passed") return painted(word, Tone::good, colour);
  if (word == "skipped") return painted(word, Tone::warn, colour);
  return painted(word, Tone::bad, colour);
}

std::ostream& detail_stream(bool quiet) {
  static NullStream nowhere;
  return quiet ? nowhere : std::cout;
}

}  // namespace fc

// What a terminal shows: the progress line (through its switch and clock, and through a real
// pseudo-terminal), verdict colours and NO_COLOR.
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "catch.h"
#include "reports/progress.h"
#include "reports/terminal.h"

namespace fc {
namespace {

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Runs `shell_command` with its stdin, stdout and stderr on a new pseudo-terminal and returns
// everything it wrote there.
std::string run_on_terminal(const std::string& shell_command) {
  int master = -1;
  const pid_t child = forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(child >= 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", shell_command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string seen;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(master, buffer, sizeof buffer);
    if (n <= 0) break;  // EIO once the child has closed the terminal
    seen.append(buffer, static_cast<std::size_t>(n));
  }
  close(master);
  int status = 0;
  waitpid(child, &status, 0);
  return seen;
}

}  // namespace

TEST_CASE("progress shows done/total, the elapsed time and an ETA, redrawn in place", "[terminal]") {
  double now = 100;
  std::ostringstream out;
  {
    Progress progress("fixtures", 4, out, true, [&] { return now; });
    CHECK(progress.line() == "fixtures: 0/4, 0:00 elapsed");
    now = 103;
    progress.advance();
    CHECK(progress.line() == "fixtures: 1/4, 0:03 elapsed, ETA 0:09");
    CHECK(out.str().find("\r\033[Kfixtures: 1/4, 0:03 elapsed, ETA 0:09") != std::string::npos);
    // Within a tenth of a second nothing is redrawn; the last step always is.
    const std::size_t draws = occurrences(out.str(), "\r\033[Kfixtures");
    now = 103.05;
    progress.advance();
    CHECK(occurrences(out.str(), "\r\033[Kfixtures") == draws);
    now = 103.06;
    progress.advance(2);
    CHECK(progress.line() == "fixtures: 4/4, 0:03 elapsed");  // no ETA at the end
    CHECK(occurrences(out.str(), "\r\033[Kfixtures") == draws + 1);
  }
  // Cleared when done: the terminal is left as the command's own output left it.
  const std::string text = out.str();
  CHECK(text.substr(text.size() - 4) == "\r\033[K");
}

TEST_CASE("progress shows nothing until it knows how much work there is", "[terminal]") {
  std::ostringstream out;
  Progress progress("faults", 0, out, true, [] { return 0.0; });
  CHECK(out.str().empty());  // never "0/0"
  progress.add_total(5);
  CHECK(out.str() == "\r\033[Kfaults: 0/5, 0:00 elapsed");
}

TEST_CASE("progress writes nothing where it is not shown", "[terminal]") {
  std::ostringstream out;
  {
    Progress progress("trace", 3, out, false, [] { return 0.0; });
    progress.advance(3);
    progress.clear();
  }
  CHECK(out.str().empty());
}

TEST_CASE("durations read as M:SS, and H:MM:SS from an hour", "[terminal]") {
  CHECK(duration_text(0) == "0:00");
  CHECK(duration_text(59.6) == "1:00");
  CHECK(duration_text(754) == "12:34");
  CHECK(duration_text(3723) == "1:02:03");
}

TEST_CASE("colour only on a terminal and only when NO_COLOR is unset or empty", "[terminal]") {
  CHECK(colour_wanted(true, nullptr));
  CHECK(colour_wanted(true, ""));
  CHECK_FALSE(colour_wanted(true, "1"));
  CHECK_FALSE(colour_wanted(false, nullptr));
  CHECK(painted_verdict("pass", false) == "pass");
  CHECK(painted_verdict("pass", true) == "\033[32mpass\033[0m");
  CHECK(painted_verdict("FAIL", true) == "\033[1;31mFAIL\033[0m");
  CHECK(painted_verdict("skipped", true) == "\033[33mskipped\033[0m");
}

TEST_CASE("on a terminal a trace shows progress and coloured verdicts; NO_COLOR and files turn each off",
          "[terminal]") {
  const std::string trace = "CUDA_VISIBLE_DEVICES= " + std::string(FC_CLI_PATH) +
                            " --trace --impl cpu-emulated --shape 1,1,16,64 --seed 1 2 3";
  const std::string terminal = run_on_terminal(trace);
  INFO(terminal);
  CHECK(terminal.find("trace: 0/3, 0:00 elapsed") != std::string::npos);
  CHECK(terminal.find("\033[32mpass\033[0m") != std::string::npos);

  const std::string no_color = run_on_terminal("NO_COLOR=1 " + trace);
  CHECK(no_color.find("trace: 0/3") != std::string::npos);
  CHECK(no_color.find("\033[32m") == std::string::npos);

  const std::filesystem::path err =
      std::filesystem::temp_directory_path() / ("fc_terminal_" + std::to_string(::getpid()) + ".txt");
  const std::string to_files = run_on_terminal(trace + " 2>" + err.string());
  std::ifstream in(err);
  const std::string stderr_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(err);
  CHECK(stderr_text.find("trace:") == std::string::npos);  // stderr is a file: no progress
  CHECK(stderr_text.find("no CUDA device") != std::string::npos);
  CHECK(to_files.find("\033[32mpass") != std::string::npos);  // stdout is still the terminal
}

TEST_CASE("sensitivity shows its progress on a terminal", "[terminal]") {
  const std::string terminal = run_on_terminal("CUDA_VISIBLE_DEVICES= " + std::string(FC_CLI_PATH) +
                                               " sensitivity --impl cpu-emulated --sk 64 128 --dtype fp16 --seeds 1");
  INFO(terminal);
  CHECK(terminal.find("sensitivity: 0/2, 0:00 elapsed") != std::string::npos);
  CHECK(terminal.find("sensitivity: 2/2") != std::string::npos);
}

}  // namespace fc

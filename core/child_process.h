#pragma once
// Another program run to its end: flashcore-check itself in a child (an isolated faulty run,
// a run under compute-sanitizer). posix_spawn, no shell: the arguments reach it as given.
#include <string>
#include <vector>

namespace fc {

struct ChildProcess {
  std::vector<std::string> args;         // args[0]: the program's path
  std::vector<std::string> environment;  // NAME=VALUE set over this process's environment
  std::string output;                    // stdout and stderr to this file; empty: this process's own
  double deadline_seconds = 0;           // killed (SIGKILL) when still running after it; 0: none
};

// Runs `child` and waits for it: its exit status, or -signal when a signal ended it (-SIGKILL
// past its deadline). Throws fc::Error naming `what` when it cannot be started.
int run_child_process(const ChildProcess& child, const std::string& what);

// A program on PATH (the first executable found), else "".
std::string find_on_path(const std::string& name);

}  // namespace fc

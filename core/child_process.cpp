#include "core/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace fc {
namespace {

std::string variable_name(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

// This process's environment with `overrides` set over it.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> merged = overrides;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool overridden = false;
    for (const std::string& o : overrides) overridden = overridden || variable_name(o) == variable_name(entry);
    if (!overridden) merged.push_back(entry);
  }
  return merged;
}

// Owns posix_spawn's file actions.
class SpawnActions {
 public:
  explicit SpawnActions(const std::string& what) {
    if (const int status = posix_spawn_file_actions_init(&actions_)) {
      throw Error(what + ": cannot prepare the child process: " + std::strerror(status));
    }
  }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

}  // namespace

int run_child_process(const ChildProcess& child, const std::string& what) {
  if (child.args.empty()) throw Error(what + ": no program to run");
  const std::vector<std::string> environment = merged_environment(child.environment);
  std::vector<char*> argv, envp;
  for (const std::string& a : child.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  SpawnActions actions(what);
  int spawned = 0;
  if (!child.output.empty()) {
    spawned = posix_spawn_file_actions_addopen(actions.get(), 1, child.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (spawned == 0) spawned = posix_spawn_file_actions_adddup2(actions.get(), 1, 2);
  }
  pid_t pid = 0;
  if (spawned == 0) spawned = posix_spawn(&pid, child.args[0].c_str(), actions.get(), nullptr, argv.data(), envp.data());
  if (spawned != 0) throw Error(what + ": cannot start " + child.args[0] + ": " + std::strerror(spawned));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(child.deadline_seconds);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, child.deadline_seconds > 0 ? WNOHANG : 0);
    if (done == pid) break;
    if (done == -1 && errno != EINTR) throw Error(what + ": waiting for " + child.args[0] + ": " + std::strerror(errno));
    if (child.deadline_seconds > 0 && std::chrono::steady_clock::now() > give_up) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) == -1 && errno == EINTR) {
      }
      return -SIGKILL;
    }
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::istringstream folders(path);
  for (std::string folder; std::getline(folders, folder, ':');) {
    if (folder.empty()) continue;
    const std::string candidate = folder + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace fc

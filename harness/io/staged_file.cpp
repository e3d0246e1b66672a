#include "harness/io/staged_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"

namespace fc {
namespace {

// The live temporary files, for the signal handler: a fixed table it can read without
// allocating. A slot is free (0), being filled (1) or live (2); the handler removes the live
// ones (unlink is async-signal-safe). A file past the table's size is still removed by its
// owner, only not on a signal.
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{0};
  char path[4096];
};
Slot g_slots[kSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kSignals)];

void remove_live_files(int sig) {
  for (Slot& slot : g_slots) {
    if (slot.state.load() == 2) ::unlink(slot.path);
  }
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  }
  ::raise(sig);  // what the signal would have done without us (it is blocked until we return)
}

// Once: a handler for each of the signals that would otherwise end the process; one that is
// ignored (a background job's SIGINT) or handled by someone else is left as it is.
void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (std::size_t i = 0; i < std::size(kSignals); ++i) {
      if (::sigaction(kSignals[i], nullptr, &g_previous[i]) != 0 || g_previous[i].sa_handler != SIG_DFL) continue;
      struct sigaction action {};
      action.sa_handler = remove_live_files;
      sigemptyset(&action.sa_mask);
      ::sigaction(kSignals[i], &action, nullptr);
    }
  });
}

int track(const std::string& temp_path) {
  if (temp_path.size() >= sizeof(Slot::path)) return -1;
  install_handlers();
  // From a rotating start, so that a slot just freed is not refilled at once while a handler
  // may still be reading it.
  static std::atomic<unsigned> next{0};
  const int first = static_cast<int>(next.fetch_add(1) % kSlots);
  for (int k = 0; k < kSlots; ++k) {
    const int i = (first + k) % kSlots;
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_slots[i].path, temp_path.c_str(), temp_path.size() + 1);
    g_slots[i].state.store(2);
    return i;
  }
  return -1;
}

void untrack(int slot) {
  if (slot >= 0) g_slots[slot].state.store(0);
}

// The files this process reads (kept once a command turns it on: a library user or a test
// may well rewrite what it read), and the paths its command said it will write.
std::mutex g_paths_mutex;
bool g_keep_inputs = false;
std::vector<std::string> g_inputs, g_claimed_outputs;

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

// Where an output goes: staged beside a regular file's path (false), or straight into a
// character device or fifo (true: /dev/stdout, /dev/null; renaming onto one, as root, would
// replace it). Refuses a folder, any other file that is not a regular one, and a file this
// process reads (the output would replace what it was made from).
bool written_in_place(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) throw file_error(path, "cannot write: it is a folder");
  if (std::filesystem::is_character_file(status) || std::filesystem::is_fifo(status)) return true;
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw file_error(path, "cannot write: it exists and is neither a regular file, a character device nor a fifo");
  }
  const std::lock_guard<std::mutex> lock(g_paths_mutex);
  for (const std::string& input : g_inputs) {
    if (same_file(path, input)) throw file_error(path, "cannot write: it is an input of this command");
  }
  return false;
}

}  // namespace

void guard_input_files() {
  const std::lock_guard<std::mutex> lock(g_paths_mutex);
  g_keep_inputs = true;
}

void note_input_file(const std::string& path) {
  const std::lock_guard<std::mutex> lock(g_paths_mutex);
  if (g_keep_inputs) g_inputs.push_back(path);
}

StagedFile::StagedFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw Error("cannot write a file to an empty path");
  // A device or fifo, through links too (/dev/stdout to a pipe): written in place. The check
  // follows links, so it has also seen through them to an input or a folder.
  if (written_in_place(path_)) {
    if (::access(path_.c_str(), W_OK) != 0) throw file_error(path_, std::string("cannot write (") + std::strerror(errno) + ")");
    in_place_ = true;
    target_ = temp_path_ = path_;
    return;
  }
  // A symbolic link is written through: the file it leads to is written (made, where the link
  // dangles), the link stays.
  std::error_code ec;
  std::filesystem::path target = std::filesystem::absolute(path_);
  for (int links = 0; std::filesystem::is_symlink(std::filesystem::symlink_status(target, ec)); ++links) {
    const std::filesystem::path next = std::filesystem::read_symlink(target, ec);
    if (ec || links == 40) throw file_error(path_, "cannot write (its link does not resolve)");
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  target_ = target.lexically_normal().string();
  static std::atomic<unsigned> counter{0};
  temp_path_ = target_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw file_error(path_, std::string("cannot write (") + std::strerror(errno) + ")");
  ::close(fd);
  slot_ = track(temp_path_);
}

StagedFile::~StagedFile() {
  if (!committed_ && !in_place_) std::remove(temp_path_.c_str());
  untrack(slot_);
}

void StagedFile::commit() {
  if (in_place_) {  // nothing staged: the writer's stream already reported its errors
    committed_ = true;
    return;
  }
  // Data on disk before the name points at it: a crash never leaves a truncated file at path.
  const int fd = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw file_error(path_, "cannot write (sync of " + temp_path_ + ": " + std::strerror(error) + ")");
  }
  ::close(fd);
  if (std::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    throw file_error(path_, "cannot write (rename from " + temp_path_ + ": " + std::strerror(errno) + ")");
  }
  committed_ = true;
  untrack(slot_);  // after the rename: a signal before it still removes the temporary file
  slot_ = -1;
}

void check_output_path(const std::string& path) {
  if (path.empty()) throw Error("an output path is empty");
  StagedFile probe(path);  // removed again on the way out
  // The file written, links followed ("a.json", "./a.json" and a link to it are one output).
  const std::string written = std::filesystem::absolute(probe.target()).lexically_normal().string();
  const std::lock_guard<std::mutex> lock(g_paths_mutex);
  for (const std::string& claimed : g_claimed_outputs) {
    if (claimed == written) throw file_error(path, "cannot write: named as an output twice");
  }
  g_claimed_outputs.push_back(written);
}

}  // namespace fc

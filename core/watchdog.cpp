#include "core/watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/numeric.h"

namespace fc {

double run_timeout_seconds() {
  const char* text = std::getenv("FC_RUN_TIMEOUT");
  if (!text || !*text) return 600;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  // A week at most: a longer wait is no limit, and overflows the clock's arithmetic.
  if (end == text || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds) || seconds > 604800) {
    throw Error(std::string("FC_RUN_TIMEOUT='") + text + "': not a number of seconds in (0, 604800]");
  }
  return seconds;
}

Watchdog::Watchdog(std::string what, double seconds) : seconds_(seconds) {
  // Made now: when it fires, the hung thread may hold the allocator's lock.
  message_ = "flashcore-check: " + what + " did not finish within " + number_text(seconds) +
             " s: it hangs (a wait that never completes: a barrier phase or arrival count, a flag never set). A "
             "running kernel cannot be stopped, so flashcore-check stops here (FC_RUN_TIMEOUT sets the limit)\n";
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (finished_.wait_for(lock, std::chrono::duration<double>(seconds_), [this] { return done_; })) return;
    std::fflush(stdout);  // what earlier cases printed
    const ssize_t written = ::write(STDERR_FILENO, message_.data(), message_.size());
    (void)written;  // nothing is left to do if stderr is gone
    std::_Exit(kExitHang);
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  finished_.notify_one();
  thread_.join();
}

}  // namespace fc

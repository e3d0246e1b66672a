#include "core/watchdog.h"

#include <chrono>
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
  if (end == text || *end != '\0' || !(seconds > 0)) {
    throw Error(std::string("FC_RUN_TIMEOUT='") + text + "': not a positive number of seconds");
  }
  return seconds;
}

Watchdog::Watchdog(std::string what, double seconds) : what_(std::move(what)), seconds_(seconds) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (finished_.wait_for(lock, std::chrono::duration<double>(seconds_), [this] { return done_; })) return;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "flashcore-check: %s did not finish within %s s: it hangs (a wait that never completes: a barrier "
                 "phase or arrival count, a flag never set). A running kernel cannot be stopped, so flashcore-check "
                 "stops here (FC_RUN_TIMEOUT sets the limit)\n",
                 what_.c_str(), number_text(seconds_).c_str());
    std::fflush(stderr);
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

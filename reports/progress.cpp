#include "reports/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace fc {
namespace {

constexpr double kRedrawInterval = 0.1;  // seconds
constexpr const char* kClearLine = "\r\033[K";

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string duration_text(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  }
  return text;
}

Progress::Progress(std::string what, std::int64_t total)
    : Progress(std::move(what), total, std::cerr, ::isatty(STDERR_FILENO) == 1, steady_seconds) {}

Progress::Progress(std::string what, std::int64_t total, std::ostream& out, bool shown, Clock clock)
    : what_(std::move(what)), total_(total), out_(out), shown_(shown), clock_(std::move(clock)) {
  start_ = clock_();
  draw(true);
}

Progress::~Progress() { clear(); }

void Progress::add_total(std::int64_t n) {
  total_ += n;
  draw(false);
}

void Progress::advance(std::int64_t n) {
  done_ += n;
  draw(done_ >= total_);
}

void Progress::clear() {
  if (!drawn_) return;
  out_ << kClearLine << std::flush;
  drawn_ = false;
}

std::string Progress::line() const {
  const double elapsed = clock_() - start_;
  std::string text = what_ + ": " + std::to_string(done_) + "/" + std::to_string(total_) + ", " +
                     duration_text(elapsed) + " elapsed";
  if (done_ > 0 && done_ < total_) {
    text += ", ETA " + duration_text(elapsed * static_cast<double>(total_ - done_) / static_cast<double>(done_));
  }
  return text;
}

void Progress::draw(bool force) {
  if (!shown_ || total_ == 0) return;  // nothing known to be done yet
  const double now = clock_();
  if (!force && drawn_ && now - last_draw_ < kRedrawInterval) return;
  std::cout.flush();  // what the command printed goes before the line, not into it
  out_ << kClearLine << line() << std::flush;
  drawn_ = true;
  last_draw_ = now;
}

}  // namespace fc

#pragma once
// Wall-clock seconds between laps.
#include <chrono>

namespace fc {

class Stopwatch {
 public:
  // Seconds since construction or the previous lap.
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace fc

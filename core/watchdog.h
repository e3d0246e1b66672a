#pragma once
// A run that never returns (a kernel waiting on a barrier whose phase never completes, a
// loop on a flag no one sets) would hang the harness with it. A Watchdog armed around a run
// ends the process when the run has not finished after its timeout: one line saying what
// hung and for how long, then exit status kExitHang. Nothing can continue: a device cannot
// be taken back from a kernel that still runs, and a host thread cannot be stopped safely.
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace fc {

inline constexpr int kExitHang = 3;

// Seconds a run may take: FC_RUN_TIMEOUT when set (a number of seconds up to a week), else
// 600. Throws fc::Error naming the variable when it is set to anything else.
double run_timeout_seconds();

class Watchdog {
 public:
  // `what`: the run, as the line names it ("wgmma-fused: the trace build's run").
  explicit Watchdog(std::string what, double seconds = run_timeout_seconds());
  ~Watchdog();  // disarms
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string message_;
  double seconds_;
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace fc

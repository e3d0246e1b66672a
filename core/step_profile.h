#pragma once
// Where an evaluation's time goes, step by step (--profile-evaluation): seconds spent in each
// named step, summed over the threads that ran it. A step is timed with the device work queued
// before it and in it finished (its `finish` called at both ends), so that a step's seconds are
// its own and not the next read-back's; the steps run slower than unprofiled.
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/stopwatch.h"

namespace fc {

class StepProfile {
 public:
  void add(const std::string& step, double seconds);
  // In the order each step was first seen; a nested step is named "parent / child".
  std::vector<std::pair<std::string, double>> steps() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, double>> steps_;
};

// Times one step into `profile` from construction to destruction; nothing when profile is null.
class StepTimer {
 public:
  StepTimer(StepProfile* profile, std::string step, std::function<void()> finish = {});
  ~StepTimer();
  // Ends this step and starts `step`.
  void next(std::string step);
  StepTimer(StepTimer&& o) noexcept
      : profile_(std::exchange(o.profile_, nullptr)), step_(std::move(o.step_)), finish_(std::move(o.finish_)),
        watch_(o.watch_) {}
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  StepTimer& operator=(StepTimer&&) = delete;

 private:
  StepProfile* profile_;
  std::string step_;
  std::function<void()> finish_;
  Stopwatch watch_;
};

}  // namespace fc

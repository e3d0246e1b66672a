#include "core/step_profile.h"

#include <algorithm>

namespace fc {

void StepProfile::add(const std::string& step, double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = std::find_if(steps_.begin(), steps_.end(), [&](const auto& s) { return s.first == step; });
  if (it == steps_.end()) {
    steps_.emplace_back(step, seconds);
  } else {
    it->second += seconds;
  }
}

std::vector<std::pair<std::string, double>> StepProfile::steps() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return steps_;
}

StepTimer::StepTimer(StepProfile* profile, std::string step, std::function<void()> finish)
    : profile_(profile), step_(std::move(step)), finish_(std::move(finish)) {
  if (!profile_) return;
  if (finish_) finish_();
  watch_.lap();
}

StepTimer::~StepTimer() {
  if (!profile_) return;
  try {
    if (finish_) finish_();
  } catch (...) {  // the step's own error is what propagates
  }
  profile_->add(step_, watch_.lap());
}

void StepTimer::next(std::string step) {
  if (!profile_) return;
  if (finish_) finish_();
  profile_->add(step_, watch_.lap());
  step_ = std::move(step);
}

}  // namespace fc

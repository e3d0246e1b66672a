#pragma once
// Timing device work: warm up, then the median of repeated runs measured with events.
#include <algorithm>
#include <functional>
#include <vector>

#include "stages/device_memory.h"

namespace fc {

inline double median_ms(int warmup, int repeats, cudaStream_t stream, const std::function<void()>& work) {
  for (int i = 0; i < warmup; ++i) work();
  std::vector<double> times;
  CudaEvent start, stop;
  for (int i = 0; i < repeats; ++i) {
    start.record(stream);
    work();
    stop.record(stream);
    times.push_back(stop.since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace fc

#include "core/resource_usage.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>

namespace fc {
namespace {
std::atomic<std::int64_t> device_now{0}, device_peak{0};
}  // namespace

std::int64_t peak_host_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

void count_device_allocation(std::int64_t bytes) {
  const std::int64_t now = device_now.fetch_add(bytes) + bytes;
  std::int64_t peak = device_peak.load();
  while (now > peak && !device_peak.compare_exchange_weak(peak, now)) {
  }
}

std::int64_t peak_device_bytes() { return device_peak.load(); }

}  // namespace fc

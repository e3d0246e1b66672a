#include "core/resource_usage.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>

#include "core/numeric.h"

namespace fc {
namespace {
std::atomic<std::int64_t> device_now{0}, device_peak{0};
}  // namespace

std::int64_t peak_host_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::int64_t available_host_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
}

std::int64_t physical_host_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
}

void count_device_allocation(std::int64_t bytes) {
  const std::int64_t now = device_now.fetch_add(bytes) + bytes;
  std::int64_t peak = device_peak.load();
  while (now > peak && !device_peak.compare_exchange_weak(peak, now)) {
  }
}

std::int64_t peak_device_bytes() { return device_peak.load(); }

std::optional<std::string> host_memory_shortfall(double bytes, const std::string& what) {
  const double memory = static_cast<double>(physical_host_bytes()), room = 0.8 * memory;
  if (memory <= 0 || bytes <= room) return std::nullopt;
  return what + " need about " + number_text(bytes / (1 << 30)) + " GiB of host memory, more than the " +
         number_text(room / (1 << 30)) + " GiB (80%) of this machine's " + number_text(memory / (1 << 30)) +
         " GiB one run may hold";
}

}  // namespace fc

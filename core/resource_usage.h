#pragma once
// What a run costs in memory: the process's peak resident set (getrusage) and the peak of the
// device memory the harness holds (every allocation goes through stages/device_memory.h's
// DeviceMemory, which counts it here; cuBLASLt's and the driver's own are not in it).
#include <cstdint>
#include <optional>
#include <string>

namespace fc {

std::int64_t peak_host_rss_bytes();
// Host memory a process can still take without swapping: MemAvailable of /proc/meminfo, or the
// free physical pages where that is missing.
std::int64_t available_host_bytes();
// The machine's physical memory (0 when unknown): what no single case or file may exceed.
std::int64_t physical_host_bytes();
// Why `bytes` of host memory that `what` needs ("its trace's captures") do not fit in the 80%
// of the machine's memory one piece of work may hold at once, or nullopt (also when the
// machine does not say its memory): a case or run declined before it starts, not ended by a
// failed allocation.
std::optional<std::string> host_memory_shortfall(double bytes, const std::string& what);

void count_device_allocation(std::int64_t bytes);  // negative when freed
std::int64_t peak_device_bytes();

}  // namespace fc

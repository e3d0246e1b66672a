#include "reference/gpu/device_kv_cache.h"

namespace fc::gpu {
namespace {

std::size_t bytes_of(const DeviceKv& kv) {
  return static_cast<std::size_t>(kv.first->size() + kv.second->size()) * sizeof(double);
}

}  // namespace

std::optional<DeviceKv> DeviceKvCache::find(std::uint64_t id) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = kept_.find(id);
  if (it == kept_.end()) return std::nullopt;
  return it->second;
}

bool DeviceKvCache::has_room(std::size_t bytes) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return bytes_ + bytes <= budget_;
}

void DeviceKvCache::keep(std::uint64_t id, const DeviceKv& kv) {
  const std::size_t bytes = bytes_of(kv);
  const std::lock_guard<std::mutex> lock(mutex_);
  if (bytes_ + bytes > budget_ || kept_.count(id) != 0) return;
  kept_.emplace(id, kv);
  bytes_ += bytes;
}

void DeviceKvCache::clear() {
  const std::lock_guard<std::mutex> lock(mutex_);
  kept_.clear();
  bytes_ = 0;
}

}  // namespace fc::gpu

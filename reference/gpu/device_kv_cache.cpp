#include "reference/gpu/device_kv_cache.h"

#include <exception>

namespace fc::gpu {

DeviceKv DeviceKvCache::get(std::uint64_t id, std::size_t bytes, const std::function<DeviceKv(bool shared)>& upload) {
  std::promise<DeviceKv> uploaded;
  std::shared_future<DeviceKv> shared;
  std::uint64_t serial = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = id != 0 ? kept_.find(id) : kept_.end();
    if (it != kept_.end()) {
      shared = it->second.kv;  // uploaded, or being uploaded by another thread
    } else if (id != 0 && bytes_ + bytes <= budget_) {
      shared = uploaded.get_future().share();
      serial = ++serial_;
      kept_.emplace(id, Kept{shared, serial});
      bytes_ += bytes;
    }
  }
  if (!shared.valid()) return upload(false);  // not kept: this block's own
  if (serial != 0) {  // this thread uploads it, with the lock released
    try {
      uploaded.set_value(upload(true));
    } catch (...) {
      // The threads waiting on it fail as this one does; a later block uploads again.
      uploaded.set_exception(std::current_exception());
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = kept_.find(id);
      if (it != kept_.end() && it->second.serial == serial) {
        kept_.erase(it);
        bytes_ -= bytes;
      }
    }
  }
  return shared.get();
}

void DeviceKvCache::clear() {
  const std::lock_guard<std::mutex> lock(mutex_);
  kept_.clear();
  bytes_ = 0;
}

}  // namespace fc::gpu

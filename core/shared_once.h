#pragma once
// Values made once a key and shared by whoever asks meanwhile: the first get of a key makes it
// with no lock held and the gets of it meanwhile wait for that; a make that throws fails them
// and leaves the key to be made again. Kept within a byte budget until forgotten. The heads' K
// and V on the host (reference/head_kv_cache.h) and on the device (reference/gpu/
// device_kv_cache.h) are kept this way.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <utility>

namespace fc {

template <class Key, class Value>
class SharedOnce {
 public:
  explicit SharedOnce(std::size_t budget_bytes) : budget_(budget_bytes) {}

  // The value kept under key, or make(true)'s, kept when `may_keep` and the budget has room for
  // `bytes` more; else make(false)'s, this caller's own.
  template <class Make>
  Value get(const Key& key, std::size_t bytes, bool may_keep, Make&& make) {
    std::promise<Value> made;
    std::shared_future<Value> shared;
    std::uint64_t serial = 0;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = kept_.find(key);
      if (it != kept_.end()) {
        shared = it->second.value;  // made, or being made by another caller
      } else if (may_keep && bytes_ + bytes <= budget_) {
        shared = made.get_future().share();
        serial = ++serial_;
        kept_.emplace(key, Entry{shared, serial, bytes});
        bytes_ += bytes;
      }
    }
    if (!shared.valid()) return make(false);
    if (serial != 0) {
      try {
        made.set_value(make(true));
      } catch (...) {
        made.set_exception(std::current_exception());
        const std::lock_guard<std::mutex> lock(mutex_);
        const auto it = kept_.find(key);
        if (it != kept_.end() && it->second.serial == serial) erase(it);  // not another make's entry
      }
    }
    return shared.get();
  }

  // Drops what is kept under key (those holding it keep their copies).
  void forget(const Key& key) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = kept_.find(key);
    if (it != kept_.end()) erase(it);
  }
  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    kept_.clear();
    bytes_ = 0;
  }
  std::size_t bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
  }

 private:
  struct Entry {
    std::shared_future<Value> value;
    std::uint64_t serial;  // which make
    std::size_t bytes;
  };
  void erase(typename std::map<Key, Entry>::iterator it) {
    bytes_ -= it->second.bytes;
    kept_.erase(it);
  }

  const std::size_t budget_;
  mutable std::mutex mutex_;
  std::map<Key, Entry> kept_;
  std::size_t bytes_ = 0;
  std::uint64_t serial_ = 0;
};

}  // namespace fc

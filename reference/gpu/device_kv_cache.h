#pragma once
// Heads' K and V on the device, by HeadInputs::kv_id, shared by the evaluator threads of one
// EvaluatorSource: the blocks and windows of rows that judge a head again (any thread) upload
// its K and V once, and blocks that ask while it is being uploaded wait for it (as
// head_kv_cache.h does for the widening). A copy is complete before it is shared (its stream
// synchronized), and it is freed on the stream it was allocated on, once no evaluator holds it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "reference/gpu/device_matrix.h"

namespace fc::gpu {

using DeviceKv = std::pair<std::shared_ptr<const DeviceMatrix>, std::shared_ptr<const DeviceMatrix>>;

class DeviceKvCache {
 public:
  explicit DeviceKvCache(std::size_t budget_bytes) : budget_(budget_bytes) {}

  // The copy kept under id, or upload(shared)'s, kept when the budget has room for `bytes` more
  // (nothing is dropped for it: windows judge the heads in the same order each time, so
  // dropping the oldest would never hit). upload(true) must leave its copy complete for other
  // streams; upload(false) is one block's own. Id 0: never kept.
  DeviceKv get(std::uint64_t id, std::size_t bytes, const std::function<DeviceKv(bool shared)>& upload);
  // Drops every copy (before the streams they were allocated on go).
  void clear();

 private:
  struct Kept {
    std::shared_future<DeviceKv> kv;
    std::uint64_t serial = 0;  // which upload: a failed one drops its own entry alone
  };
  const std::size_t budget_;
  std::mutex mutex_;
  std::map<std::uint64_t, Kept> kept_;
  std::size_t bytes_ = 0;
  std::uint64_t serial_ = 0;
};

}  // namespace fc::gpu

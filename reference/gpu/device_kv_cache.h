#pragma once
// Heads' K and V on the device, by HeadInputs::kv_id, shared by the evaluator threads of one
// EvaluatorSource: the blocks and windows of rows that judge a head again (any thread) upload
// its K and V once. A copy is complete before it is shared (its stream synchronized), and it is
// freed on the stream it was allocated on, once no evaluator holds it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "reference/gpu/device_matrix.h"

namespace fc::gpu {

using DeviceKv = std::pair<std::shared_ptr<const DeviceMatrix>, std::shared_ptr<const DeviceMatrix>>;

class DeviceKvCache {
 public:
  explicit DeviceKvCache(std::size_t budget_bytes) : budget_(budget_bytes) {}

  std::optional<DeviceKv> find(std::uint64_t id) const;
  // Whether keep would take `bytes` more now (the caller need not finish a copy it cannot keep).
  bool has_room(std::size_t bytes) const;
  // Keeps kv under id while the budget has room (nothing is dropped for it: windows judge the
  // heads in the same order each time, so dropping the oldest would never hit); nothing when id
  // is kept already. kv's stream must be synchronized.
  void keep(std::uint64_t id, const DeviceKv& kv);
  // Drops every copy (before the streams they were allocated on go).
  void clear();

 private:
  const std::size_t budget_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, DeviceKv> kept_;
  std::size_t bytes_ = 0;
};

}  // namespace fc::gpu

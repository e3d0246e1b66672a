#pragma once
// Heads' K and V on the device, by HeadInputs::kv_id, shared by the evaluator threads of one
// EvaluatorSource: the blocks and windows of rows that judge a head again (any thread) upload
// its K and V once, and blocks that ask while it is being uploaded wait for it (as
// head_kv_cache.h does for the widening). A copy is complete before it is shared (its stream
// synchronized), and it is freed on the stream it was allocated on, once no evaluator holds it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "core/shared_once.h"
#include "reference/gpu/device_matrix.h"

namespace fc::gpu {

using DeviceKv = std::pair<std::shared_ptr<const DeviceMatrix>, std::shared_ptr<const DeviceMatrix>>;

class DeviceKvCache {
 public:
  explicit DeviceKvCache(std::size_t budget_bytes) : kept_(budget_bytes) {}

  // The copy kept under id, or upload(shared)'s, kept when the budget has room for `bytes` more
  // (nothing is dropped for it: windows judge the heads in the same order each time, so
  // dropping the oldest would never hit). upload(true) must leave its copy complete for other
  // streams; upload(false) is one block's own. Id 0: never kept.
  template <class Upload>
  DeviceKv get(std::uint64_t id, std::size_t bytes, Upload&& upload) {
    return kept_.get(id, bytes, id != 0, std::forward<Upload>(upload));
  }
  // Drops every copy (before the streams they were allocated on go).
  void clear() { kept_.clear(); }

 private:
  SharedOnce<std::uint64_t, DeviceKv> kept_;
};

}  // namespace fc::gpu

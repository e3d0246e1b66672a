#include "reference/head_kv_cache.h"

#include <utility>

namespace fc {
namespace {

std::size_t bytes_of(const HeadKv& kv) {
  return static_cast<std::size_t>(kv.k.size() + kv.v.size()) * sizeof(double);
}

}  // namespace

HeadKvCache::HeadKvCache(const AttentionInputs& in, Keep keep, std::size_t budget_bytes)
    : in_(in),
      keep_(keep),
      budget_(budget_bytes),
      first_id_(reserve_kv_ids(static_cast<std::uint64_t>(in.problem.shape.batch * in.problem.shape.kv_head_count()))) {}

std::int64_t HeadKvCache::slot(std::int64_t b, std::int64_t kv_head) const {
  return b * in_.problem.shape.kv_head_count() + kv_head;
}

void HeadKvCache::expect(std::int64_t b, std::int64_t h) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++expected_[slot(b, in_.problem.shape.kv_head_of(h))];
}

HeadKv HeadKvCache::take(std::int64_t b, std::int64_t h) {
  const std::int64_t at = slot(b, in_.problem.shape.kv_head_of(h));
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto expected = expected_.find(at);
    if (expected != expected_.end() && expected->second > 0) --expected->second;
    const auto it = kept_.find(at);
    if (it != kept_.end()) {
      HeadKv kv = std::move(it->second);
      bytes_ -= bytes_of(kv);
      kept_.erase(it);
      return kv;
    }
  }
  return head_kv(in_, b, h, first_id_ + static_cast<std::uint64_t>(at));
}

void HeadKvCache::give_back(HeadKv&& kv) {
  if (kv.k.size() == 0) return;
  const std::size_t bytes = bytes_of(kv);
  const std::lock_guard<std::mutex> lock(mutex_);
  const std::int64_t at = slot(kv.b, kv.kv_head);
  if (kv.id != first_id_ + static_cast<std::uint64_t>(at)) return;  // not this cache's
  const auto expected = expected_.find(at);
  if (keep_ == Keep::while_needed && (expected == expected_.end() || expected->second == 0)) {
    const auto it = kept_.find(at);  // one an earlier block gave back, that none will take
    if (it != kept_.end()) {
      bytes_ -= bytes_of(it->second);
      kept_.erase(it);
    }
    return;
  }
  if (kept_.count(at) != 0 || bytes_ + bytes > budget_) return;
  bytes_ += bytes;
  kept_.emplace(at, std::move(kv));
}

std::size_t HeadKvCache::kept_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace fc

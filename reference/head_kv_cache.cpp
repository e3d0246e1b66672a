#include "reference/head_kv_cache.h"

#include <exception>
#include <utility>

namespace fc {

HeadKvCache::HeadKvCache(const AttentionInputs& in, Keep keep, std::size_t budget_bytes)
    : in_(in),
      keep_(keep),
      budget_(budget_bytes),
      head_bytes_(static_cast<std::size_t>(2 * in.problem.shape.kv_len * in.problem.shape.head_dim) * sizeof(double)),
      first_id_(reserve_kv_ids(static_cast<std::uint64_t>(in.problem.shape.batch * in.problem.shape.kv_head_count()))) {}

std::int64_t HeadKvCache::slot(std::int64_t b, std::int64_t kv_head) const {
  return b * in_.problem.shape.kv_head_count() + kv_head;
}

void HeadKvCache::expect(std::int64_t b, std::int64_t h) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++expected_[slot(b, in_.problem.shape.kv_head_of(h))];
}

void HeadKvCache::drop(std::int64_t at) {
  if (kept_.erase(at) != 0) bytes_ -= head_bytes_;
}

HeadKv HeadKvCache::take(std::int64_t b, std::int64_t h) {
  const std::int64_t at = slot(b, in_.problem.shape.kv_head_of(h));
  const std::uint64_t id = first_id_ + static_cast<std::uint64_t>(at);
  std::promise<HeadKv> widened;
  std::shared_future<HeadKv> shared;
  std::uint64_t serial = 0;
  enum class Source { kept, widen_and_keep, widen } source = Source::widen;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::int64_t& expected = expected_[at];
    if (expected > 0) --expected;
    const bool last = keep_ == Keep::while_needed && expected == 0;
    const auto it = kept_.find(at);
    if (it != kept_.end()) {  // widened already, or being widened by another take
      shared = it->second.kv;
      source = Source::kept;
      if (last) drop(at);
    } else if (!last && bytes_ + head_bytes_ <= budget_) {
      shared = widened.get_future().share();
      source = Source::widen_and_keep;
      serial = ++serial_;
      kept_.emplace(at, Kept{shared, serial});
      bytes_ += head_bytes_;
    }
  }
  // Widened with the lock released: takes of other heads go on meanwhile.
  if (source != Source::kept) ++widenings_;
  if (source == Source::widen) return head_kv(in_, b, h, id);  // no take to come, or no room
  if (source == Source::widen_and_keep) {
    try {
      widened.set_value(head_kv(in_, b, h, id));
    } catch (...) {
      // The takes waiting on it fail as this one does; a later take widens again.
      widened.set_exception(std::current_exception());
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = kept_.find(at);
      if (it != kept_.end() && it->second.serial == serial) drop(at);
    }
  }
  return shared.get();
}

std::size_t HeadKvCache::widenings() const { return widenings_.load(); }

std::size_t HeadKvCache::kept_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace fc

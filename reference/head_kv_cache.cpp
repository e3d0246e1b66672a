#include "reference/head_kv_cache.h"

namespace fc {

HeadKvCache::HeadKvCache(const AttentionInputs& in, Keep keep, std::size_t budget_bytes)
    : in_(in),
      keep_(keep),
      head_bytes_(static_cast<std::size_t>(2 * in.problem.shape.kv_len * in.problem.shape.head_dim) * sizeof(double)),
      first_id_(reserve_kv_ids(static_cast<std::uint64_t>(in.problem.shape.batch * in.problem.shape.kv_head_count()))),
      kept_(budget_bytes) {}

std::int64_t HeadKvCache::slot(std::int64_t b, std::int64_t kv_head) const {
  return b * in_.problem.shape.kv_head_count() + kv_head;
}

void HeadKvCache::expect(std::int64_t b, std::int64_t h) {
  if (keep_ == Keep::for_next_call) return;  // only while_needed counts the takes to come
  const std::lock_guard<std::mutex> lock(mutex_);
  ++expected_[slot(b, in_.problem.shape.kv_head_of(h))];
}

HeadKv HeadKvCache::take(std::int64_t b, std::int64_t h) {
  const std::int64_t at = slot(b, in_.problem.shape.kv_head_of(h));
  bool last = false;  // no take of the head is to come: nothing kept for one
  if (keep_ == Keep::while_needed) {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::int64_t& expected = expected_[at];
    if (expected > 0) --expected;
    last = expected == 0;
  }
  const std::uint64_t id = first_id_ + static_cast<std::uint64_t>(at);
  HeadKv kv = kept_.get(at, head_bytes_, !last, [&](bool) {
    ++widenings_;
    return head_kv(in_, b, h, id);
  });
  if (last) kept_.forget(at);
  return kv;
}

std::size_t HeadKvCache::widenings() const { return widenings_.load(); }

std::size_t HeadKvCache::kept_bytes() const { return kept_.bytes(); }

}  // namespace fc

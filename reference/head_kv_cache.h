#pragma once
// The FP64 K and V of a case's heads, shared by the blocks of rows and the windows of a trace
// build that judge the same head: at 128k keys and D 128 a head's are 268 MB, widened from the
// inputs (and uploaded, by a GPU evaluator) each time otherwise. Each (batch, K/V head) has one
// id for the cache's life, under which a GPU evaluator keeps its device copy.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "core/shared_once.h"
#include "reference/attention.h"

namespace fc {

class HeadKvCache {
 public:
  // Host bytes kept at most: a head past it is widened for each take.
  static constexpr std::size_t kDefaultBudget = std::size_t{4} << 30;
  // How long a head stays: for every take while the cache lives (a trace build's windows of
  // rows judge the same heads again), or only while takes of it are expected (expect); the
  // blocks that took it keep it as long as they run either way.
  enum class Keep { for_next_call, while_needed };

  // `in` must outlive the cache.
  explicit HeadKvCache(const AttentionInputs& in, Keep keep = Keep::while_needed,
                       std::size_t budget_bytes = kDefaultBudget);

  // One more take of query head h of batch b's K and V is to come (a block of rows to judge).
  void expect(std::int64_t b, std::int64_t h);
  // The K and V of query head h of batch b, widened once and shared: a take while another
  // thread widens them waits for those.
  HeadKv take(std::int64_t b, std::int64_t h);

  std::size_t kept_bytes() const;
  std::size_t widenings() const;  // heads widened so far (kept or not)
  const AttentionInputs& inputs() const { return in_; }

 private:
  std::int64_t slot(std::int64_t b, std::int64_t kv_head) const;

  const AttentionInputs& in_;
  const Keep keep_;
  const std::size_t head_bytes_;
  const std::uint64_t first_id_;
  SharedOnce<std::int64_t, HeadKv> kept_;  // by slot
  std::atomic<std::size_t> widenings_{0};
  std::mutex mutex_;
  std::map<std::int64_t, std::int64_t> expected_;  // takes to come, by slot
};

}  // namespace fc

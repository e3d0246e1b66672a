#pragma once
// The FP64 K and V of a case's heads, kept for the blocks of rows and the windows of a trace
// build that judge the same head again: at 128k keys and D 128 a head's are 268 MB, widened
// from the inputs (and uploaded, by a GPU evaluator) each time otherwise. Each (batch, K/V
// head) has one id for the cache's life, under which a GPU evaluator keeps its device copy.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "reference/attention.h"

namespace fc {

class HeadKvCache {
 public:
  // Host bytes kept at most: a head past it is widened again when judged again.
  static constexpr std::size_t kDefaultBudget = std::size_t{4} << 30;
  // What give_back keeps: every head, for a next evaluation that judges the same heads again (a
  // trace build's windows of rows), or a head only while takes of it are expected (expect).
  enum class Keep { for_next_call, while_needed };

  // `in` must outlive the cache.
  explicit HeadKvCache(const AttentionInputs& in, Keep keep = Keep::while_needed,
                       std::size_t budget_bytes = kDefaultBudget);

  // One more take of query head h of batch b's K and V is to come (a block of rows to judge).
  void expect(std::int64_t b, std::int64_t h);
  // The K and V of query head h of batch b: the kept ones, moved out, or widened again
  // (under the same id) while another block holds them.
  HeadKv take(std::int64_t b, std::int64_t h);
  // Keeps kv for the next take of its head, when its budget allows and none is kept yet; with
  // Keep::while_needed only while a take is expected, and else what is kept of it goes too.
  void give_back(HeadKv&& kv);

  std::size_t kept_bytes() const;
  const AttentionInputs& inputs() const { return in_; }

 private:
  std::int64_t slot(std::int64_t b, std::int64_t kv_head) const;

  const AttentionInputs& in_;
  const Keep keep_;
  const std::size_t budget_;
  const std::uint64_t first_id_;
  mutable std::mutex mutex_;
  std::map<std::int64_t, HeadKv> kept_;
  std::map<std::int64_t, std::int64_t> expected_;  // takes to come, by slot
  std::size_t bytes_ = 0;
};

}  // namespace fc

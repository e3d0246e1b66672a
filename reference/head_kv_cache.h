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
  // What its user (evaluate_outputs) gives back: every head, for a next evaluation that judges
  // the same heads again (a trace build's windows of rows), or a head only while blocks of the
  // current evaluation still need it.
  enum class Keep { for_next_call, while_needed };

  // `in` must outlive the cache.
  explicit HeadKvCache(const AttentionInputs& in, Keep keep = Keep::while_needed,
                       std::size_t budget_bytes = kDefaultBudget);

  // The K and V of query head h of batch b: the kept ones, moved out, or widened again
  // (under the same id) while another block holds them.
  HeadKv take(std::int64_t b, std::int64_t h);
  // Keeps kv for the next take of its head, when its budget allows and none is kept yet.
  void give_back(HeadKv&& kv);
  // Forgets what is kept of K/V head kv_head of batch b.
  void drop(std::int64_t b, std::int64_t kv_head);

  std::size_t kept_bytes() const;
  const AttentionInputs& inputs() const { return in_; }
  Keep keep() const { return keep_; }

 private:
  std::int64_t slot(std::int64_t b, std::int64_t kv_head) const;

  const AttentionInputs& in_;
  const Keep keep_;
  const std::size_t budget_;
  const std::uint64_t first_id_;
  mutable std::mutex mutex_;
  std::map<std::int64_t, HeadKv> kept_;
  std::size_t bytes_ = 0;
};

}  // namespace fc

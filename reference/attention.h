#pragma once
// The FP64 reference of attention, per (batch, head), built by chaining the stage evaluation
// functions of stage_eval.h from the exact inputs:
//   full     qk -> softmax -> pv
//   blocked  per tile of width Bc over a key range: qk[j] -> online softmax[j] -> rescale[j]
//            -> pv[j], then normalize (and the range's lse)
//   split    the key range cut into splits, each blocked, then the lse combine
// and the whole-tensor driver (parallel over heads) used by `flashcore-check reference`.
#include <cstdint>
#include <vector>

#include "core/problem.h"
#include "reference/evaluator.h"
#include "reference/stage_eval.h"

namespace fc {

// How a head's bias reaches its evaluation: a matrix formed on the host (what code that
// reads HeadInputs::bias needs), or the mask, which the evaluator reads where it runs.
enum class BiasForm { matrix, mask };

// Query head h of batch b with its K/V head (GQA: h / group), the softcap and the bias of
// every (row, key) as mask_bias gives it. With BiasForm::mask, `in` must outlive the result.
HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, BiasForm form = BiasForm::matrix);
// Only the query rows `rows` (sorted) of the head: q and the bias of those rows.
HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows,
                       BiasForm form = BiasForm::matrix);
// The same with the head's K and V given, as head_kv made them: blocks of one head's rows
// share them rather than build them again, under one kv_id.
struct HeadKv {
  std::int64_t b = -1, kv_head = -1;
  std::uint64_t id = 0;  // one per (inputs, b, K/V head) that share it, unique in the process
  std::shared_ptr<const KvMatrices> kv;
};
// `id`: one reserve_kv_ids gave for this head (head_kv_cache.h keeps one a head), or 0: K and V
// of their own, which nothing keeps for another.
HeadKv head_kv(const AttentionInputs& in, std::int64_t b, std::int64_t h, std::uint64_t id = 0);
// `count` K/V ids none has used, the first returned, the rest following it.
std::uint64_t reserve_kv_ids(std::uint64_t count);
HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows,
                       BiasForm form, const HeadKv& kv);
// Every row of the head, its K and V given.
HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, BiasForm form, const HeadKv& kv);

// FP64 elements of one reference tensor of a block of query rows (rows x keys): a head whose
// rows x keys exceed it is computed block by block (rows are independent in attention), so
// that no S x S FP64 tensor is ever held; a few dozen of a block's tensors (values and both
// bounds, end to end and stage-local) are resident per worker thread, 16 MiB each.
constexpr std::int64_t kRowBlockElements = std::int64_t{1} << 21;

// The rows [0, rows) in blocks of at most `block_elements` / keys rows (one block when the
// head fits, none when it has no rows).
std::vector<std::vector<std::int64_t>> row_blocks_of(std::int64_t rows, std::int64_t keys,
                                                     std::int64_t block_elements = kRowBlockElements);

// The arithmetic of every stage of a chain (what an implementation declares).
struct ChainArithmetic {
  Arithmetic qk, softmax, rescale, pv, normalize, lse, combine;
};
// fp32 everywhere, the final output (pv of the full chain, normalize, combine) in `io`.
ChainArithmetic nominal_arithmetic(DType io);

struct FullReference {
  Bounded scores;
  SoftmaxResult softmax;
  Bounded out;
  Bounded lse;  // max + log(sum) of each row
};
// Each chain runs on `ev` (the host's or a GPU's evaluator of the head); the HeadInputs
// overloads run on the host.
FullReference full_reference(const HeadEvaluator& ev, const ChainArithmetic& a);
FullReference full_reference(const HeadInputs& in, const ChainArithmetic& a);

struct TileReference {
  std::int64_t col_begin = 0, col_end = 0;  // key columns of this tile
  Bounded scores;
  OnlineSoftmaxResult softmax;
  Bounded rescaled;  // the accumulator after rescale, before this tile's p~ v
  Bounded acc;       // the accumulator after this tile
};
struct BlockedReference {
  std::vector<TileReference> tiles;
  Bounded out;  // acc / sum after the last tile
  Bounded lse;  // max + log(sum) over the range
};
// Online softmax over keys [col_begin, col_end) in tiles of `tile_width`. An empty range
// gives no tiles, output 0 and lse -inf.
BlockedReference blocked_reference(const HeadEvaluator& ev, std::int64_t col_begin, std::int64_t col_end,
                                   std::int64_t tile_width, const ChainArithmetic& a);
BlockedReference blocked_reference(const HeadInputs& in, std::int64_t col_begin, std::int64_t col_end,
                                   std::int64_t tile_width, const ChainArithmetic& a);

// Key range of split t of `num_splits`, in whole tiles as split-KV kernels cut it.
struct KeyRange {
  std::int64_t begin, end;
};
KeyRange split_range(std::int64_t kv_len, std::int64_t num_splits, std::int64_t tile_width, std::int64_t t);

struct SplitReference {
  std::vector<BlockedReference> splits;
  Bounded out;
  Bounded lse;  // the combined row's log-sum-exp
};
SplitReference split_reference(const HeadEvaluator& ev, std::int64_t num_splits, std::int64_t tile_width,
                               const ChainArithmetic& a);
SplitReference split_reference(const HeadInputs& in, std::int64_t num_splits, std::int64_t tile_width,
                               const ChainArithmetic& a);

// Whole tensors, FP64, computed head by head in parallel.
struct ReferenceOptions {
  std::int64_t page_width = 0;  // > 0: also the blocked (online softmax) quantities per page
  std::int64_t splits = 0;      // > 0: also the split-KV partials and their combine

  // Pages of page_width keys over `keys` (0 without pages); a page wider than every key is one.
  std::int64_t pages(std::int64_t keys) const {
    return page_width > 0 ? keys / page_width + (keys % page_width != 0) : 0;
  }
};
struct MaskedRow {
  std::int64_t b, h, row;
};
struct ReferenceTensors {
  HostTensor scores, probs, row_max, row_sum, lse, output;                 // full
  HostTensor page_max, page_sum, page_rescale, page_acc, paged_output;    // with page_width
  HostTensor split_lse, split_output, combined_output;                    // with splits
  std::vector<MaskedRow> masked_rows;                                     // rows (that exist) with no key
};
ReferenceTensors compute_reference(const AttentionInputs& in, const ReferenceOptions& options);

// Flops of attention as benchmarks count them: 4 B H Sq Sk D.
double attention_flops(const Shape& s);

}  // namespace fc

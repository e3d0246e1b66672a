#pragma once
// Which query rows a judgement compares (`--rows`). Every row of attention is computed
// independently of the others, so any subset of rows is judged exactly, all keys and all
// stages, at a fraction of the reference's cost: `all`, a sample of N rows a head, or a list.
// A sample always holds the rows where kernels go wrong first: the first and last rows, both
// sides of every boundary of the kernel's query-row blocks and key tiles, and the rows where
// a flat element offset (row x keys, row x head dim, over every batch and head) crosses
// 2^16, 2^31 and 2^32, where index arithmetic in 16 or 32 bits wraps; the rest is spread
// evenly. The flags (NaN, Inf, unwritten) always cover every element.
#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "stages/stage.h"

namespace fc {

struct RowSpec {
  enum class Kind : std::uint8_t { all, sample, list } kind = Kind::all;
  std::int64_t count = 0;          // sample: rows a head
  std::vector<std::int64_t> rows;  // list: rows of every head
};

// "all", "N" or "r1,r2,...": an fc::Error naming the text otherwise.
RowSpec parse_rows(const std::string& text);

struct RowSample {
  bool all = true;                                // every row: no subset
  std::vector<std::vector<std::int64_t>> per_head;  // [b * H + h]: sorted rows judged
  std::string coverage;                           // one sentence: what was judged
  std::int64_t judged = 0, total = 0;             // rows, over every head
};

// Refuses a listed row past the case's query rows (sample_rows does too, later).
void check_rows(const RowSpec& spec, std::int64_t q_len);

RowSample sample_rows(const Problem& problem, const StageGraph& graph, const RowSpec& spec);

}  // namespace fc

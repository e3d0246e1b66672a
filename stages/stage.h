#pragma once
// The stage contract. An implementation declares an ordered stage graph: which algorithm
// its stages follow (full, blocked by tiles, split-KV), and for each stage its kind, its
// split/tile index, the tensors it produces and the arithmetic it does. The harness maps
// every output to the FP64 reference quantity of the same name (reference/attention.h) and
// compares it under the bound that arithmetic implies.
#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "reference/attention.h"

namespace fc {

enum class StageKind : std::uint8_t { qk, softmax, rescale, pv, normalize, lse, combine };
const char* stage_kind_name(StageKind kind);

// What a stage output holds. Tile quantities (scores of a tile, p~, running max/sum, the
// accumulator) are relative to the tile width and key range of the algorithm.
enum class Quantity : std::uint8_t {
  scores,          // [B,H,Sq,cols]  scale q k^T + mask over the stage's key columns
  probs,           // [B,H,Sq,Sk]    softmax over whole rows
  p_tilde,         // [B,H,Sq,cols]  exp(s - running max) of one tile
  row_max,         // [B,H,Sq]       (running) row max
  row_sum,         // [B,H,Sq]       (running) row sum
  rescaled_acc,    // [B,H,Sq,D]     accumulator after rescale, before this tile's p~ v
  acc,             // [B,H,Sq,D]     unnormalized accumulator after this tile
  output,          // [B,H,Sq,D]     attention output (normalized)
  partial_output,  // [B,H,Sq,D]     one split's normalized output
  partial_lse,     // [B,H,Sq]       one split's log-sum-exp
  lse,             // [B,H,Sq]       the row's log-sum-exp over every key (natural log)
};
const char* quantity_name(Quantity q);
bool is_row_quantity(Quantity q);
// What a production (untraced) build produces too: the output and its lse, and a split
// algorithm's partial outputs and their lse. Everything else exists only in a trace build.
bool is_result(Quantity q);

struct StageOutput {
  std::string name;  // "p~", "max", "sum", or "" for the stage's main tensor
  Quantity quantity;
  DType dtype;       // format the kernel stores it in
  // The stored value times this is the quantity: a kernel working in base 2 records its
  // scores and maxima as they are (log2 units) and declares ln 2 here, so the conversion
  // happens in FP64 on the host instead of rounding in the kernel.
  double value_scale = 1.0;
};

struct Stage {
  StageKind kind;
  int split = -1;  // split-KV index, -1 when the algorithm has none
  int tile = -1;   // tile (page) index within the split or key range, -1 for whole rows
  std::vector<StageOutput> outputs;
  // The stage updates its output buffer in place (rescale; pv with beta = 1), so it reads
  // what an earlier stage left there.
  bool reads_own_output = false;

  std::string name() const;  // "qk", "softmax[3]", "pv[1.2]" (split 1, tile 2), "combine"
  std::string output_name(std::size_t i) const;  // "softmax[3]", "softmax[3].max"
};

struct Algorithm {
  enum class Kind : std::uint8_t { full, blocked, split } kind = Kind::full;
  std::int64_t tile_width = 0;  // blocked and split
  std::int64_t splits = 0;      // split
  std::string describe() const;
};

struct StageGraph {
  Algorithm algorithm;
  ChainArithmetic arithmetic;  // the arithmetic of each stage kind: the bounds follow from it
  std::vector<Stage> stages;   // in execution order
  // Query rows one block of the kernel owns (0: no such blocks): a row sample (--rows)
  // includes both sides of each block boundary.
  std::int64_t query_tile = 0;

  std::size_t output_count() const;  // over all stages
};

const Arithmetic& arithmetic_of(const ChainArithmetic& chain, StageKind kind);
Arithmetic& arithmetic_of(ChainArithmetic& chain, StageKind kind);

// Key columns [begin, end) of tile `tile` of split `split` (-1: untiled, unsplit).
KeyRange tile_columns(const Shape& shape, const Algorithm& algorithm, int split, int tile);
inline KeyRange stage_columns(const Shape& shape, const Algorithm& algorithm, const Stage& stage) {
  return tile_columns(shape, algorithm, stage.split, stage.tile);
}
Dims output_dims(const Shape& shape, const Algorithm& algorithm, const Stage& stage, const StageOutput& output);
// Every output of every stage of `graph` at `shape`: elements, and bytes as each is stored
// (what a trace's captures hold, or, times 8 / its size, an FP64 copy of them).
double graph_output_elements(const Shape& shape, const StageGraph& graph);
double graph_output_bytes(const Shape& shape, const StageGraph& graph);
// Throws fc::Error unless the stage has a place in the graph: a split of a split graph, a page
// of a tiled one inside its split's keys, or -1 (whole rows); each output's value scale finite
// and positive. What a snapshot's stages and a plugin's declared graph are both held to.
void check_stage_placement(const Shape& shape, const Algorithm& algorithm, const Stage& stage);

// A window of query rows: rows [first, first + rows) of every head (rows < 0: every row). A
// trace run in a window captures only those rows: each output's [B, H, R(, C)] holds them
// as R (windowed_dims). Long contexts are judged window by window when a whole trace does
// not fit the device.
struct RowWindow {
  std::int64_t first = 0, rows = -1;
  bool whole() const { return rows < 0; }
  bool holds(std::int64_t row) const { return whole() || (row >= first && row < first + rows); }
  // Rows of each head a capture in it holds, of a head's q_len.
  std::int64_t held(std::int64_t q_len) const { return whole() ? q_len : rows; }
};
// dims [B, H, R(, C)] as a run in `window` captures them.
Dims windowed_dims(Dims dims, const RowWindow& window);

// Tiles of the key range [begin, end).
std::int64_t tile_count(std::int64_t begin, std::int64_t end, std::int64_t tile_width);

// The part of a head of sequence b in a stage output that exists (varlen, core/problem.h):
// its first `rows` rows and `cols` columns. Rows past the sequence's query rows, key columns
// past its keys, and tiles that start past its keys do not exist: they are never compared
// nor counted. Every head of a sequence of full lengths exists whole.
struct Extent {
  std::int64_t rows = 0, cols = 0;
};
Extent existing_extent(const Problem& problem, const Algorithm& algorithm, const Stage& stage, const StageOutput& output,
                       std::int64_t b);

}  // namespace fc

#include "reference/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/parallel.h"

namespace fc {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

Bounded constant_rows(Eigen::Index rows, double value) {
  return Bounded::exact(MatrixR::Constant(rows, 1, value), DType::f32);
}
}  // namespace

namespace {

// The bias of the head's rows, as a mask or formed into a matrix from it.
void set_bias(HeadInputs& head, const AttentionInputs& in, std::int64_t b, std::int64_t h,
              std::vector<std::int64_t> rows, BiasForm form) {
  const HostTensor* dense = in.problem.mask.has_dense() ? &in.problem.mask.dense : nullptr;
  MaskedRows m{head_mask(in.problem, b, h), std::move(rows), dense};
  if (form == BiasForm::mask) {
    head.masked_rows = std::make_shared<const MaskedRows>(std::move(m));
    return;
  }
  head.bias.resize(head.q.rows(), head.k().rows());
  for (Eigen::Index r = 0; r < head.bias.rows(); ++r) {
    for (Eigen::Index j = 0; j < head.bias.cols(); ++j) head.bias(r, j) = m.mask.bias(m.row(r), j, m.dense_value(r, j));
  }
}

// The head's query rows `rows` (every row when null) with its K and V given.
HeadInputs head_of(const AttentionInputs& in, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>* rows,
                   BiasForm form, const HeadKv& kv) {
  if (kv.b != b || kv.kv_head != in.problem.shape.kv_head_of(h)) throw Error("head_inputs: K and V of another head");
  HeadInputs head;
  head.q = rows ? head_rows(in.q, b, h, *rows) : head_matrix(in.q, b, h);
  head.set_kv(kv.kv);
  head.kv_id = kv.id;
  head.scale = in.problem.scale;
  head.softcap = in.problem.softcap;
  set_bias(head, in, b, h, rows ? *rows : std::vector<std::int64_t>{}, form);
  return head;
}

}  // namespace

HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, BiasForm form) {
  return head_of(in, b, h, nullptr, form, head_kv(in, b, h));
}

HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, BiasForm form, const HeadKv& kv) {
  return head_of(in, b, h, nullptr, form, kv);
}

HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows,
                       BiasForm form) {
  return head_of(in, b, h, &rows, form, head_kv(in, b, h));
}

HeadInputs head_inputs(const AttentionInputs& in, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>& rows,
                       BiasForm form, const HeadKv& kv) {
  return head_of(in, b, h, &rows, form, kv);
}

namespace {
std::atomic<std::uint64_t> last_kv_id{0};
}  // namespace

std::uint64_t reserve_kv_ids(std::uint64_t count) { return last_kv_id.fetch_add(count) + 1; }

HeadKv head_kv(const AttentionInputs& in, std::int64_t b, std::int64_t h, std::uint64_t id) {
  const std::int64_t kv_head = in.problem.shape.kv_head_of(h);
  return {b, kv_head, id,
          std::make_shared<const KvMatrices>(KvMatrices{head_matrix(in.k, b, kv_head), head_matrix(in.v, b, kv_head)})};
}

ChainArithmetic nominal_arithmetic(DType io) {
  ChainArithmetic a;
  a.qk.operand = io;  // q and k are the products' operands, already in the input format
  a.pv.out = io;
  a.normalize.out = io;
  a.combine.out = io;
  return a;
}

FullReference full_reference(const HeadEvaluator& ev, const ChainArithmetic& a) {
  const HeadInputs& in = ev.inputs();
  FullReference r;
  r.scores = ev.qk(0, in.k().rows(), a.qk);
  r.softmax = ev.softmax(r.scores, a.softmax);
  r.out = ev.within_value_range(ev.pv(r.softmax.p, 0, in.v().rows(), nullptr, a.pv), 0, in.v().rows(), a.pv);
  r.lse = ev.lse(r.softmax.max, r.softmax.sum, a.lse);
  return r;
}

FullReference full_reference(const HeadInputs& in, const ChainArithmetic& a) {
  return full_reference(*host_evaluator(in), a);
}

BlockedReference blocked_reference(const HeadEvaluator& ev, std::int64_t col_begin, std::int64_t col_end,
                                   std::int64_t tile_width, const ChainArithmetic& a) {
  if (tile_width < 1) throw Error("tile width must be at least 1");
  const HeadInputs& in = ev.inputs();
  const Eigen::Index rows = in.q.rows();
  BlockedReference r;
  // The evaluator's own evaluation of the whole tiles at once, where it has one; the rest
  // (all, or the narrower last tile) one tile after another from where it stopped.
  if (col_end > col_begin) r.tiles.reserve(static_cast<std::size_t>((col_end - col_begin + tile_width - 1) / tile_width));
  const std::int64_t batched = ev.whole_tiles(col_begin, col_end, tile_width, a, r.tiles);
  Bounded max = batched > 0 ? r.tiles.back().softmax.max : constant_rows(rows, -kInf);
  Bounded sum = batched > 0 ? r.tiles.back().softmax.sum : constant_rows(rows, 0);
  Bounded acc = batched > 0 ? r.tiles.back().acc : Bounded::exact(MatrixR::Zero(rows, in.v().cols()), DType::f32);
  for (std::int64_t begin = col_begin + batched * tile_width; begin < col_end; begin += tile_width) {
    TileReference t;
    t.col_begin = begin;
    t.col_end = std::min(col_end, begin + tile_width);
    t.scores = ev.qk(t.col_begin, t.col_end, a.qk);
    t.softmax = ev.online_softmax(t.scores, max, sum, a.softmax);
    t.rescaled = ev.rescale(acc, max, t.softmax.max, a.rescale);
    t.acc = ev.pv(t.softmax.p_tilde, t.col_begin, t.col_end, &t.rescaled, a.pv);
    max = t.softmax.max;
    sum = t.softmax.sum;
    acc = t.acc;
    r.tiles.push_back(std::move(t));
  }
  r.out = ev.within_value_range(ev.normalize(acc, sum, a.normalize), col_begin, col_end, a.pv);
  r.lse = ev.lse(max, sum, a.lse);
  return r;
}

BlockedReference blocked_reference(const HeadInputs& in, std::int64_t col_begin, std::int64_t col_end,
                                   std::int64_t tile_width, const ChainArithmetic& a) {
  return blocked_reference(*host_evaluator(in), col_begin, col_end, tile_width, a);
}

KeyRange split_range(std::int64_t kv_len, std::int64_t num_splits, std::int64_t tile_width, std::int64_t t) {
  const std::int64_t tiles = (kv_len + tile_width - 1) / tile_width;
  const std::int64_t tiles_per_split = (tiles + num_splits - 1) / num_splits;
  const std::int64_t begin = std::min(kv_len, t * tiles_per_split * tile_width);
  const std::int64_t end = std::min(kv_len, (t + 1) * tiles_per_split * tile_width);
  return {begin, end};
}

SplitReference split_reference(const HeadEvaluator& ev, std::int64_t num_splits, std::int64_t tile_width,
                               const ChainArithmetic& a) {
  if (num_splits < 1) throw Error("split count must be at least 1");
  SplitReference r;
  std::vector<Bounded> outs, lses;
  for (std::int64_t t = 0; t < num_splits; ++t) {
    KeyRange range = split_range(ev.inputs().k().rows(), num_splits, tile_width, t);
    r.splits.push_back(blocked_reference(ev, range.begin, range.end, tile_width, a));
    outs.push_back(r.splits.back().out);
    lses.push_back(r.splits.back().lse);
  }
  r.out = ev.within_value_range(ev.combine(outs, lses, a.combine), 0, ev.inputs().v().rows(), a.pv);
  r.lse = ev.combine_lse(lses, a.combine);
  return r;
}

SplitReference split_reference(const HeadInputs& in, std::int64_t num_splits, std::int64_t tile_width,
                               const ChainArithmetic& a) {
  return split_reference(*host_evaluator(in), num_splits, tile_width, a);
}

double attention_flops(const Shape& s) {
  return 4.0 * static_cast<double>(s.batch) * static_cast<double>(s.heads) * static_cast<double>(s.q_len) *
         static_cast<double>(s.kv_len) * static_cast<double>(s.head_dim);
}

namespace {
// Writes a per-page [rows] vector or [rows, D] matrix into a [B,H,P,rows(,D)] tensor.
void set_page(HostTensor& t, std::int64_t b, std::int64_t h, std::int64_t page, const MatrixR& m) {
  const std::int64_t per_page = m.rows() * m.cols();
  const std::int64_t offset = ((b * t.dim(1) + h) * t.dim(2) + page) * per_page;
  double* p = t.data_as<double>() + offset;
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) p[r * m.cols() + c] = m(r, c);
}
}  // namespace

ReferenceTensors compute_reference(const AttentionInputs& in, const ReferenceOptions& options) {
  const Shape& s = in.problem.shape;
  const ChainArithmetic a = nominal_arithmetic(in.problem.dtype == DType::f32 ? DType::f32 : in.problem.dtype);
  ReferenceTensors t;
  t.scores = HostTensor(DType::f64, {s.batch, s.heads, s.q_len, s.kv_len});
  t.probs = HostTensor(DType::f64, {s.batch, s.heads, s.q_len, s.kv_len});
  t.row_max = HostTensor(DType::f64, {s.batch, s.heads, s.q_len});
  t.row_sum = HostTensor(DType::f64, {s.batch, s.heads, s.q_len});
  t.lse = HostTensor(DType::f64, {s.batch, s.heads, s.q_len});
  t.output = HostTensor(DType::f64, {s.batch, s.heads, s.q_len, s.head_dim});
  const std::int64_t pages = options.pages(s.kv_len);
  if (pages > 0) {
    t.page_max = HostTensor(DType::f64, {s.batch, s.heads, pages, s.q_len});
    t.page_sum = HostTensor(DType::f64, {s.batch, s.heads, pages, s.q_len});
    t.page_rescale = HostTensor(DType::f64, {s.batch, s.heads, pages, s.q_len});
    t.page_acc = HostTensor(DType::f64, {s.batch, s.heads, pages, s.q_len, s.head_dim});
    t.paged_output = HostTensor(DType::f64, {s.batch, s.heads, s.q_len, s.head_dim});
  }
  if (options.splits > 0) {
    t.split_lse = HostTensor(DType::f64, {s.batch, s.heads, options.splits, s.q_len});
    t.split_output = HostTensor(DType::f64, {s.batch, s.heads, options.splits, s.q_len, s.head_dim});
    t.combined_output = HostTensor(DType::f64, {s.batch, s.heads, s.q_len, s.head_dim});
  }
  const std::int64_t split_tile = options.page_width > 0 ? options.page_width : 64;

  const std::int64_t heads = s.batch * s.heads;
  parallel_for(heads, [&](std::int64_t bh) {
    const std::int64_t b = bh / s.heads, h = bh % s.heads;
    const HeadInputs head = head_inputs(in, b, h);
    const FullReference full = full_reference(head, a);
    set_head(t.scores, b, h, full.scores.value);
    set_head(t.probs, b, h, full.softmax.p.value);
    set_head(t.row_max, b, h, full.softmax.max.value);
    set_head(t.row_sum, b, h, full.softmax.sum.value);
    set_head(t.lse, b, h, full.lse.value);
    set_head(t.output, b, h, full.out.value);
    if (pages > 0) {
      const BlockedReference blocked = blocked_reference(head, 0, s.kv_len, options.page_width, a);
      for (std::int64_t j = 0; j < pages; ++j) {
        const TileReference& tile = blocked.tiles[static_cast<std::size_t>(j)];
        set_page(t.page_max, b, h, j, tile.softmax.max.value);
        set_page(t.page_sum, b, h, j, tile.softmax.sum.value);
        set_page(t.page_rescale, b, h, j, tile.softmax.rescale.value);
        set_page(t.page_acc, b, h, j, tile.acc.value);
      }
      set_head(t.paged_output, b, h, blocked.out.value);
    }
    if (options.splits > 0) {
      const SplitReference split = split_reference(head, options.splits, split_tile, a);
      for (std::int64_t j = 0; j < options.splits; ++j) {
        set_page(t.split_lse, b, h, j, split.splits[static_cast<std::size_t>(j)].lse.value);
        set_page(t.split_output, b, h, j, split.splits[static_cast<std::size_t>(j)].out.value);
      }
      set_head(t.combined_output, b, h, split.out.value);
    }
  });
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t i = 0; i < in.problem.q_len_of(b); ++i)  // rows past a sequence's length do not exist
        if (t.row_max.get((b * s.heads + h) * s.q_len + i) == -kInf) t.masked_rows.push_back({b, h, i});
  return t;
}

std::vector<std::vector<std::int64_t>> row_blocks_of(std::int64_t rows, std::int64_t keys, std::int64_t block_elements) {
  const std::int64_t per_block = std::max<std::int64_t>(1, block_elements / std::max<std::int64_t>(keys, 1));
  std::vector<std::vector<std::int64_t>> blocks;
  for (std::int64_t start = 0; start < rows; start += per_block) {
    blocks.emplace_back();
    for (std::int64_t r = start; r < std::min(rows, start + per_block); ++r) blocks.back().push_back(r);
  }
  return blocks;
}

}  // namespace fc

#include "harness/io/streamed_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <omp.h>

#include "core/parallel.h"
#include "harness/io/case_file.h"

namespace fc {
namespace {

// What one block of rows gives: every tensor's piece, in write order.
struct Piece {
  std::string dataset;
  Dims offset;
  HostTensor block;
};

HostTensor block_of(const MatrixR& m, Dims dims) {
  HostTensor t(DType::f64, std::move(dims));
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) t.set(r * m.cols() + c, m(r, c));
  return t;
}

// A [rows, cols] matrix of head (b, h) at rows r0..: a [1,1,rows,cols] piece, or [1,1,rows]
// for a row quantity; `page` >= 0 puts it in page (split) `page` of a per-page tensor.
Piece piece(const std::string& dataset, const MatrixR& m, std::int64_t b, std::int64_t h, std::int64_t r0,
            bool row_quantity, std::int64_t page = -1) {
  Dims offset{b, h}, dims{1, 1};
  if (page >= 0) {
    offset.push_back(page);
    dims.push_back(1);
  }
  offset.push_back(r0);
  dims.push_back(m.rows());
  if (!row_quantity) {
    offset.push_back(0);
    dims.push_back(m.cols());
  }
  return {dataset, std::move(offset), block_of(m, std::move(dims))};
}

struct Block {
  std::int64_t b, h;
  std::vector<std::int64_t> rows;
};

}  // namespace

double streamed_reference_bytes(const Shape& s, const ReferenceOptions& options) {
  const std::int64_t pages = options.pages(s.kv_len);
  const Dims full{s.batch, s.heads, s.q_len, s.kv_len}, rows{s.batch, s.heads, s.q_len}, out_dims{s.batch, s.heads, s.q_len, s.head_dim};
  const auto count = [](const Dims& d) {
    double n = 1;
    for (const std::int64_t x : d) n *= static_cast<double>(x);
    return n;
  };
  double elements = 2 * count(full) + 3 * count(rows) + count(out_dims);
  if (pages > 0) elements += 3 * count(rows) * static_cast<double>(pages) + count(out_dims) * static_cast<double>(pages + 1);
  if (options.splits > 0) {
    elements += count(rows) * static_cast<double>(options.splits) + count(out_dims) * static_cast<double>(options.splits + 1);
  }
  return 8 * elements;
}

std::vector<MaskedRow> write_reference_streamed(H5Writer& out, const AttentionInputs& in, const ReferenceOptions& options,
                                                std::int64_t budget_bytes) {
  const Shape& s = in.problem.shape;
  const ChainArithmetic a = nominal_arithmetic(in.problem.dtype == DType::f32 ? DType::f32 : in.problem.dtype);
  const std::int64_t pages = options.pages(s.kv_len);
  const std::int64_t split_tile = options.page_width > 0 ? options.page_width : 64;
  const Dims full{s.batch, s.heads, s.q_len, s.kv_len}, rows{s.batch, s.heads, s.q_len}, out_dims{s.batch, s.heads, s.q_len, s.head_dim};
  for (const char* name : {"scores", "probs"}) out.create_dataset(std::string("/reference/full/") + name, DType::f64, full);
  for (const char* name : {"row_max", "row_sum", "lse"}) out.create_dataset(std::string("/reference/full/") + name, DType::f64, rows);
  out.create_dataset("/reference/full/output", DType::f64, out_dims);
  if (pages > 0) {
    for (const char* name : {"row_max", "row_sum", "rescale"}) {
      out.create_dataset(std::string("/reference/paged/") + name, DType::f64, {s.batch, s.heads, pages, s.q_len});
    }
    out.create_dataset("/reference/paged/acc", DType::f64, {s.batch, s.heads, pages, s.q_len, s.head_dim});
    out.create_dataset("/reference/paged/output", DType::f64, out_dims);
  }
  if (options.splits > 0) {
    out.create_dataset("/reference/split/lse", DType::f64, {s.batch, s.heads, options.splits, s.q_len});
    out.create_dataset("/reference/split/output", DType::f64, {s.batch, s.heads, options.splits, s.q_len, s.head_dim});
    out.create_dataset("/reference/split/combined", DType::f64, out_dims);
  }

  // Blocks small enough that the ones computed at once fit the budget: a block's FP64 working
  // set is about 24 matrices of its rows x keys (values and two bounds of the scores, p and
  // their intermediates).
  const std::int64_t threads = std::max(1, omp_get_max_threads());
  const std::int64_t per_block = std::max<std::int64_t>(budget_bytes / (24 * 8 * threads), 4096);
  std::vector<Block> blocks;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::vector<std::int64_t>& r : row_blocks_of(s.q_len, std::max(s.kv_len, s.head_dim), per_block)) {
        blocks.push_back({b, h, std::move(r)});
      }

  std::vector<MaskedRow> masked;
  for (std::size_t first = 0; first < blocks.size(); first += static_cast<std::size_t>(threads)) {
    const std::size_t count = std::min(blocks.size() - first, static_cast<std::size_t>(threads));
    std::vector<std::vector<Piece>> pieces(count);
    parallel_for(static_cast<std::int64_t>(count), [&](std::int64_t k) {
      const Block& block = blocks[first + static_cast<std::size_t>(k)];
      const std::int64_t b = block.b, h = block.h, r0 = block.rows.front();
      const HeadInputs head = head_inputs(in, b, h, block.rows, BiasForm::mask);
      std::vector<Piece>& mine = pieces[static_cast<std::size_t>(k)];
      {
        const FullReference f = full_reference(head, a);
        mine.push_back(piece("/reference/full/scores", f.scores.value, b, h, r0, false));
        mine.push_back(piece("/reference/full/probs", f.softmax.p.value, b, h, r0, false));
        mine.push_back(piece("/reference/full/row_max", f.softmax.max.value, b, h, r0, true));
        mine.push_back(piece("/reference/full/row_sum", f.softmax.sum.value, b, h, r0, true));
        mine.push_back(piece("/reference/full/lse", f.lse.value, b, h, r0, true));
        mine.push_back(piece("/reference/full/output", f.out.value, b, h, r0, false));
      }
      if (pages > 0) {
        const BlockedReference blocked = blocked_reference(head, 0, s.kv_len, options.page_width, a);
        for (std::int64_t j = 0; j < pages; ++j) {
          const TileReference& tile = blocked.tiles[static_cast<std::size_t>(j)];
          mine.push_back(piece("/reference/paged/row_max", tile.softmax.max.value, b, h, r0, true, j));
          mine.push_back(piece("/reference/paged/row_sum", tile.softmax.sum.value, b, h, r0, true, j));
          mine.push_back(piece("/reference/paged/rescale", tile.softmax.rescale.value, b, h, r0, true, j));
          mine.push_back(piece("/reference/paged/acc", tile.acc.value, b, h, r0, false, j));
        }
        mine.push_back(piece("/reference/paged/output", blocked.out.value, b, h, r0, false));
      }
      if (options.splits > 0) {
        const SplitReference split = split_reference(head, options.splits, split_tile, a);
        for (std::int64_t j = 0; j < options.splits; ++j) {
          mine.push_back(piece("/reference/split/lse", split.splits[static_cast<std::size_t>(j)].lse.value, b, h, r0, true, j));
          mine.push_back(piece("/reference/split/output", split.splits[static_cast<std::size_t>(j)].out.value, b, h, r0, false, j));
        }
        mine.push_back(piece("/reference/split/combined", split.out.value, b, h, r0, false));
      }
    });
    for (std::size_t k = 0; k < count; ++k) {  // HDF5 one writer: in block order
      const Block& block = blocks[first + k];
      for (const Piece& p : pieces[k]) {
        out.write_block(p.dataset, p.offset, p.block);
        if (p.dataset != "/reference/full/row_max") continue;
        for (std::size_t i = 0; i < block.rows.size(); ++i) {  // rows past a sequence's length do not exist
          const std::int64_t row = block.rows[i];
          if (row < in.problem.q_len_of(block.b) && p.block.get(static_cast<std::int64_t>(i)) == -std::numeric_limits<double>::infinity()) {
            masked.push_back({block.b, block.h, row});
          }
        }
      }
    }
  }
  write_reference_extras(out, masked, options);
  return masked;
}

}  // namespace fc

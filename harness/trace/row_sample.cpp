#include "harness/trace/row_sample.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace fc {
namespace {

std::int64_t parse_count(const std::string& text, const std::string& all) {
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < 0) {
    throw Error("--rows '" + all + "': expected all, a number of rows, or a list of rows (0,17,4095)");
  }
  return v;
}

// Rows either side of every multiple of `tile` (a block of the kernel starts there).
void add_boundaries(std::set<std::int64_t>& rows, std::int64_t tile, std::int64_t q_len, std::int64_t budget) {
  if (tile <= 0 || tile >= q_len) return;
  const std::int64_t boundaries = (q_len - 1) / tile;
  // Every boundary when the budget allows; else evenly chosen ones, the first and last kept.
  const std::int64_t step = std::max<std::int64_t>(1, (2 * boundaries + budget - 1) / std::max<std::int64_t>(budget, 1));
  for (std::int64_t k = 1; k <= boundaries; k += step) {
    rows.insert(k * tile - 1);
    rows.insert(k * tile);
  }
  rows.insert(boundaries * tile - 1);
  rows.insert(boundaries * tile);
}

}  // namespace

RowSpec parse_rows(const std::string& text) {
  RowSpec spec;
  if (text == "all") return spec;
  if (text.find(',') == std::string::npos) {
    spec.kind = RowSpec::Kind::sample;
    spec.count = parse_count(text, text);
    if (spec.count == 0) throw Error("--rows '0': judge at least one row");
    return spec;
  }
  spec.kind = RowSpec::Kind::list;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    spec.rows.push_back(parse_count(text.substr(start, comma - start), text));
    start = comma + 1;
  }
  return spec;
}

void check_rows(const RowSpec& spec, std::int64_t q_len) {
  if (spec.kind != RowSpec::Kind::list) return;
  for (std::int64_t r : spec.rows) {
    if (r >= q_len) throw Error("--rows: row " + std::to_string(r) + " is past the case's " + std::to_string(q_len));
  }
}

RowSample sample_rows(const Problem& p, const StageGraph& g, const RowSpec& spec) {
  const Shape& s = p.shape;
  const std::int64_t heads = s.batch * s.heads;
  RowSample out;
  out.total = heads * s.q_len;
  if (spec.kind == RowSpec::Kind::all || (spec.kind == RowSpec::Kind::sample && spec.count >= s.q_len)) {
    out.judged = out.total;
    out.coverage = "every row";
    return out;
  }
  out.all = false;
  out.per_head.assign(static_cast<std::size_t>(heads), {});
  if (spec.kind == RowSpec::Kind::list) {
    check_rows(spec, s.q_len);
    std::vector<std::int64_t> rows = spec.rows;
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    for (auto& head : out.per_head) head = rows;
    out.judged = heads * static_cast<std::int64_t>(rows.size());
    out.coverage = std::to_string(rows.size()) + " listed rows of " + std::to_string(s.q_len) + " a head";
    return out;
  }

  // The rows every head shares: first, last, block and tile boundaries, then an even spread.
  std::set<std::int64_t> shared{0, s.q_len - 1};
  add_boundaries(shared, g.query_tile, s.q_len, spec.count / 4);
  add_boundaries(shared, g.algorithm.tile_width, s.q_len, spec.count / 4);
  const std::size_t boundary_rows = shared.size();
  for (std::int64_t k = 0; static_cast<std::int64_t>(shared.size()) < spec.count && k < spec.count; ++k) {
    shared.insert(k * (s.q_len - 1) / std::max<std::int64_t>(spec.count - 1, 1));
  }
  for (auto& head : out.per_head) head.assign(shared.begin(), shared.end());

  // Where a flat offset of the scores [B,H,Sq,Sk] or of the output [B,H,Sq,D], in elements or
  // in bytes of a 2- or 4-byte format, crosses a power of two that 16- or 32-bit index
  // arithmetic wraps at: the row that crosses it, the one before and the first past it.
  int wraps = 0;
  for (const std::int64_t width : {s.kv_len, s.head_dim}) {
    for (const std::int64_t unit : {1, 2, 4}) {
      for (const int bits : {16, 31, 32}) {
        const std::int64_t flat_row = (std::int64_t{1} << bits) / (width * unit);
        for (const std::int64_t r : {flat_row - 1, flat_row, flat_row + 1}) {
          if (r < 0 || r >= out.total) continue;
          std::vector<std::int64_t>& head = out.per_head[static_cast<std::size_t>(r / s.q_len)];
          const std::int64_t row = r % s.q_len;
          if (!std::binary_search(head.begin(), head.end(), row)) {
            head.insert(std::upper_bound(head.begin(), head.end(), row), row);
            ++wraps;
          }
        }
      }
    }
  }
  for (const auto& head : out.per_head) out.judged += static_cast<std::int64_t>(head.size());
  out.coverage = std::to_string(shared.size()) + " rows of " + std::to_string(s.q_len) + " a head (first and last, " +
                 std::to_string(boundary_rows - std::min<std::size_t>(boundary_rows, 2)) +
                 " at block and tile boundaries, the rest spread evenly)" +
                 (wraps ? ", and " + std::to_string(wraps) + " where a flat offset (in elements or bytes) crosses 2^16, 2^31 or 2^32" : "") +
                 ": " + std::to_string(out.judged) + " of " + std::to_string(out.total) + " rows judged";
  return out;
}

}  // namespace fc

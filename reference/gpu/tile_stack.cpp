#include "reference/gpu/tile_stack.h"

#include "core/error.h"

namespace fc::gpu {
namespace {

DeviceMatrix view_rows(const DeviceMatrix& m, std::int64_t first, std::int64_t rows, const DevicePtr& owner) {
  if (m.size() == 0) return DeviceMatrix();
  return DeviceMatrix::view(m.row(first), rows, m.cols(), m.stream(), owner);
}

bool matrix_follows(const DeviceMatrix& a, const DeviceMatrix& b) {
  if (a.size() == 0 || b.size() == 0) return a.size() == 0 && b.size() == 0;
  return a.owner() && a.owner() == b.owner() && a.rows() == b.rows() && a.cols() == b.cols() &&
         b.data() == a.data() + a.size();
}

}  // namespace

Bounded resident_on_device(DevicePtr d) {
  Bounded b;
  b.format = d->format;
  b.device = std::move(d);
  return b;
}

Bounded resident_on_device(DeviceBounded d) { return resident_on_device(std::make_shared<const DeviceBounded>(std::move(d))); }

DevicePtr tile_of(const DevicePtr& stack, std::int64_t tiles, std::int64_t t) {
  const std::int64_t rows = tiles > 0 ? stack->value.rows() / tiles : 0;
  auto tile = std::make_shared<DeviceBounded>();
  tile->value = view_rows(stack->value, t * rows, rows, stack);
  tile->bound = view_rows(stack->bound, t * rows, rows, stack);
  tile->tight = view_rows(stack->tight, t * rows, rows, stack);
  tile->format = stack->format;
  // An empty tile keeps its shape: a view of nothing is a default (0 x 0) matrix.
  if (tile->value.size() == 0) tile->value = DeviceMatrix(rows, stack->value.cols(), stack->value.stream());
  return tile;
}

std::vector<Bounded> tiles_of(const DevicePtr& stack, std::int64_t tiles) {
  std::vector<Bounded> out;
  for (std::int64_t t = 0; t < tiles; ++t) out.push_back(resident_on_device(tile_of(stack, tiles, t)));
  return out;
}

std::vector<Bounded> tiles_of(DeviceBounded&& stack, std::int64_t tiles) {
  return tiles_of(std::make_shared<const DeviceBounded>(std::move(stack)), tiles);
}

bool follows(const DeviceBounded& a, const DeviceBounded& b) {
  return a.format == b.format && a.value.size() > 0 && matrix_follows(a.value, b.value) &&
         matrix_follows(a.bound, b.bound) && matrix_follows(a.tight, b.tight);
}

DevicePtr stack_view(const std::vector<DevicePtr>& items, std::size_t first, std::size_t count) {
  const DeviceBounded& head = *items[first];
  if (count == 1) return items[first];
  for (std::size_t i = first + 1; i < first + count; ++i) {
    if (!follows(*items[i - 1], *items[i])) throw Error("gpu reference: tiles stacked that do not follow one another");
  }
  const std::int64_t rows = head.value.rows() * static_cast<std::int64_t>(count);
  auto stack = std::make_shared<DeviceBounded>();
  stack->value = view_rows(head.value, 0, rows, items[first]);
  stack->bound = view_rows(head.bound, 0, rows, items[first]);
  stack->tight = view_rows(head.tight, 0, rows, items[first]);
  stack->format = head.format;
  return stack;
}

std::vector<std::pair<std::size_t, std::size_t>> runs_following(
    std::initializer_list<const std::vector<DevicePtr>*> inputs) {
  const std::size_t n = inputs.size() > 0 ? (*inputs.begin())->size() : 0;
  return runs_of(n, [&](std::size_t i) {
    for (const std::vector<DevicePtr>* v : inputs) {
      if (!follows(*(*v)[i - 1], *(*v)[i])) return false;
    }
    return true;
  });
}

}  // namespace fc::gpu

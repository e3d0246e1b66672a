#pragma once
// Tiles of one shape held one after another in one allocation, "a stack": tile t is rows
// [t rows, (t + 1) rows) of a [tiles * rows, cols] matrix. The GPU reference evaluates the
// tiles of a blocked chain this way, a few launches for all of them: each tile reaches the
// callers as a bounded tensor whose matrices view the stack, and a run of such tiles, or of
// the captures stacked alike, is one stack again without a copy.
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "reference/gpu/device_matrix.h"
#include "reference/stage_eval.h"

namespace fc::gpu {

using DevicePtr = std::shared_ptr<const DeviceBounded>;

// A bounded tensor that lives on the device.
Bounded resident_on_device(DevicePtr d);
Bounded resident_on_device(DeviceBounded d);

// Tile t of the `tiles` of `stack`, its matrices views that keep the stack alive.
DevicePtr tile_of(const DevicePtr& stack, std::int64_t tiles, std::int64_t t);
std::vector<Bounded> tiles_of(const DevicePtr& stack, std::int64_t tiles);
// The same of a stack just evaluated.
std::vector<Bounded> tiles_of(DeviceBounded&& stack, std::int64_t tiles);

// Whether b has a's shape and format and lies right after it in the same stack, matrix by
// matrix (both exact, or both with bounds).
bool follows(const DeviceBounded& a, const DeviceBounded& b);

// items[first, first + count), each following the one before, as one stack (a view).
DevicePtr stack_view(const std::vector<DevicePtr>& items, std::size_t first, std::size_t count);

// [0, n) cut into runs [first, first + count): item i joins the run of item i - 1 when
// joins(i) holds.
template <class Joins>
std::vector<std::pair<std::size_t, std::size_t>> runs_of(std::size_t n, Joins joins) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && joins(i)) {
      ++runs.back().second;
    } else {
      runs.emplace_back(i, 1);
    }
  }
  return runs;
}

// Runs of items (each input vector holds one tensor an item) in which every input of an
// item follows the same input of the item before.
std::vector<std::pair<std::size_t, std::size_t>> runs_following(
    std::initializer_list<const std::vector<DevicePtr>*> inputs);

}  // namespace fc::gpu

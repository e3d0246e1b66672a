#include "harness/trace/capture.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/error.h"
#include "stages/device_kernels.h"

namespace fc {
namespace {
unsigned long long to_logical(const TensorView& v, unsigned long long offset) {
  return offset == kNoIndex ? kNoIndex : static_cast<unsigned long long>(v.logical_index(static_cast<std::int64_t>(offset)));
}

void make_indices_logical(Captured& c) {
  FlagCounts& f = c.flags;
  f.first_nan = to_logical(c.view, f.first_nan);
  f.first_inf = to_logical(c.view, f.first_inf);
  f.first_unwritten = to_logical(c.view, f.first_unwritten);
  if (f.first_foreign != kNoIndex) {
    f.first_foreign = (to_logical(c.view, f.first_foreign >> 8) << 8) | (f.first_foreign & 0xFF);
  }
}

bool row_major(const TensorView& v) {
  if (v.strides.empty()) return true;
  TensorView dense = v;
  dense.strides.clear();
  return v.strides == dense.effective_strides();
}

// An output of dims [B,H,R(,C)] as rows over B*H*R of C elements each (1 for [B,H,R]).
std::int64_t row_width(const Dims& dims) { return dims.size() == 4 ? dims[3] : 1; }
std::int64_t row_count(const Dims& dims) { return numel_of(dims) / std::max<std::int64_t>(row_width(dims), 1); }

// The view's elements in storage order into `to` (host memory), from host or device memory.
void copy_storage(const TensorView& view, void* to, cudaStream_t stream) {
  const std::size_t bytes = static_cast<std::size_t>(view.numel()) * dtype_size(view.dtype);
  if (view.on_device) {
    FC_CUDA(cudaMemcpyAsync(to, view.data, bytes, cudaMemcpyDeviceToHost, stream));
    FC_CUDA(cudaStreamSynchronize(stream));
  } else {
    std::memcpy(to, view.data, bytes);
  }
}
// A device copy of a row-major device view, or null when it would leave less than
// `headroom` bytes of the device free.
std::shared_ptr<const DeviceMemory> device_copy(const TensorView& view, std::size_t headroom, cudaStream_t stream) {
  const std::size_t bytes = static_cast<std::size_t>(view.numel()) * dtype_size(view.dtype);
  std::size_t free = 0, total = 0;
  FC_CUDA(cudaMemGetInfo(&free, &total));
  if (bytes + headroom > free) return nullptr;
  auto copy = std::make_shared<DeviceMemory>(bytes);
  FC_CUDA(cudaMemcpyAsync(copy->get(), view.data, bytes, cudaMemcpyDeviceToDevice, stream));
  return copy;
}
}  // namespace

HostTensor copy_to_host(const TensorView& view, cudaStream_t stream) {
  HostTensor storage(view.dtype, view.dims);
  copy_storage(view, storage.data(), stream);
  if (row_major(view)) return storage;
  HostTensor logical(view.dtype, view.dims);
  const std::size_t width = dtype_size(view.dtype);
  const auto* from = static_cast<const std::uint8_t*>(storage.data());
  auto* to = static_cast<std::uint8_t*>(logical.data());
  for (std::int64_t offset = 0; offset < storage.numel(); ++offset) {
    std::memcpy(to + view.logical_index(offset) * width, from + offset * width, width);
  }
  return logical;
}

CaptureTap::CaptureTap(const StageGraph& graph, const Problem& problem, bool copy_to_host, cudaStream_t stream,
                       bool results_only, bool fuse_flags)
    : graph_(graph),
      problem_(problem),
      copy_(copy_to_host),
      stream_(stream),
      results_only_(results_only),
      fuse_flags_(fuse_flags) {
  for (std::size_t s = 0; s < graph.stages.size(); ++s) {
    first_slot_.push_back(captured_.size());
    for (std::size_t o = 0; o < graph.stages[s].outputs.size(); ++o) {
      Captured c;
      c.stage = s;
      c.output = o;
      captured_.push_back(c);
    }
  }
  fused_rows_.assign(captured_.size(), {});
  blocks_.assign(captured_.size(), {});
  in_blocks_.assign(captured_.size(), 0);
}

std::size_t CaptureTap::slot(std::size_t stage, std::size_t output) const {
  if (stage >= graph_.stages.size() || output >= graph_.stages[stage].outputs.size()) {
    throw Error("implementation captured stage " + std::to_string(stage) + " output " + std::to_string(output) +
                ", which its stage graph does not declare");
  }
  return first_slot_[stage] + output;
}

Dims CaptureTap::declared_dims(std::size_t stage, std::size_t output) const {
  const Stage& st = graph_.stages[stage];
  return windowed_dims(output_dims(problem_.shape, graph_.algorithm, st, st.outputs[output]), window_);
}

unsigned long long unwindowed_index(unsigned long long index, const Dims& held, std::int64_t q_len,
                                    const RowWindow& window) {
  if (index == kNoIndex || window.whole() || held.size() < 3) return index;
  const auto cols = static_cast<unsigned long long>(held.size() == 4 ? held[3] : 1);
  const auto rows = static_cast<unsigned long long>(held[2]);
  const unsigned long long c = index % cols, r = (index / cols) % rows, bh = index / cols / rows;
  return (bh * static_cast<unsigned long long>(q_len) + static_cast<unsigned long long>(window.first) + r) * cols + c;
}

std::int64_t held_row(const Captured& c, std::int64_t row) {
  if (c.window.whole()) return row;
  return c.window.holds(row) ? row - c.window.first : -1;
}

MatrixR captured_head(const Captured& c, std::int64_t b, std::int64_t h, std::int64_t q_len) {
  const MatrixR held = head_matrix(c.tensor, b, h);
  if (c.window.whole()) return held;
  MatrixR m = MatrixR::Constant(q_len, held.cols(), std::numeric_limits<double>::quiet_NaN());
  m.middleRows(c.window.first, held.rows()) = held;
  return m;
}

FlagCounts* CaptureTap::device_slot(std::size_t index) {
  if (!device_flags_.get()) {
    device_flags_ = DeviceMemory(captured_.size() * sizeof(FlagCounts));
    const std::vector<FlagCounts> fresh(captured_.size());
    FC_CUDA(cudaMemcpyAsync(device_flags_.get(), fresh.data(), device_flags_.bytes(), cudaMemcpyHostToDevice, stream_));
  }
  return device_flags_.as<FlagCounts>() + index;
}

FlagSlot CaptureTap::fused_flags(std::size_t stage, std::size_t output, const TensorView& view, std::int64_t first_row,
                                 FlagAccess access) {
  const std::size_t index = slot(stage, output);
  const StageOutput& declared = graph_.stages[stage].outputs[output];
  if (!fuse_flags_ || !view.on_device || !row_major(view) || first_row < 0) return {};
  if (results_only_ && !is_result(declared.quantity)) return {};
  if (copy_ && (problem_.layout.varlen() || access == FlagAccess::stores)) return {};
  const Dims want = declared_dims(stage, output);
  const std::int64_t cols = row_width(want);
  // A view the capture will refuse gets the tap's own pass (and the capture says why).
  if (view.dtype != declared.dtype || view.dims.empty() || (want.size() == 4 && view.dims.back() != cols)) return {};
  fused_rows_[index].insert(first_row);
  return {device_slot(index), view.buffer_id, static_cast<unsigned long long>(first_row * cols)};
}

std::size_t CaptureTap::fused_slots() const {
  return static_cast<std::size_t>(
      std::count_if(fused_rows_.begin(), fused_rows_.end(), [](const auto& rows) { return !rows.empty(); }));
}

void CaptureTap::capture_rows(std::size_t stage, std::size_t output, const TensorView& block, std::int64_t first_row) {
  const std::size_t index = slot(stage, output);
  Captured& c = captured_[index];
  const StageOutput& declared = graph_.stages[stage].outputs[output];
  if (results_only_ && !is_result(declared.quantity)) return;
  const Dims want = declared_dims(stage, output);
  const std::int64_t cols = row_width(want), total_rows = row_count(want);
  const std::int64_t rows = block.dims.empty() ? 0 : block.dims[0];
  const Dims block_want = want.size() == 4 ? Dims{rows, cols} : Dims{rows};
  if (!in_blocks_[index]) {  // the first block
    in_blocks_[index] = 1;
    c.present = true;
    c.view = block;  // its kind, dtype and buffer; no data: no one buffer holds the whole output
    c.view.data = nullptr;
    c.view.dims = want;
    c.view.strides.clear();
    c.flags_of_extent = copy_ && problem_.layout.varlen();
    if (copy_) c.tensor = HostTensor(declared.dtype, want);
  }
  if (!c.problem.empty()) return;
  if (block.dims != block_want || block.dtype != declared.dtype || !row_major(block) || first_row < 0 ||
      first_row + rows > total_rows || block.on_device != c.view.on_device || block.buffer_id != c.view.buffer_id) {
    c.problem = "captured rows " + std::to_string(first_row) + ".. as " + dtype_name(block.dtype) + " " +
                dims_string(block.dims) + ", declared " + dtype_name(declared.dtype) + " " + dims_string(want);
    return;
  }
  for (const RowBlock& b : blocks_[index]) {
    if (first_row < b.first + b.rows && b.first < first_row + rows) {
      c.problem = "captured rows " + std::to_string(std::max(first_row, b.first)) + ".." +
                  std::to_string(std::min(first_row + rows, b.first + b.rows) - 1) + " twice";
      return;
    }
  }
  blocks_[index].push_back({first_row, rows});
  const auto base = static_cast<unsigned long long>(first_row * cols);
  if (!c.flags_of_extent && fused_rows_[index].count(first_row) == 0) {
    if (block.on_device) {
      launch_flags(block, device_slot(index), stream_, base);
    } else {
      merge_flags(c.flags, host_flags(block), base);
    }
  }
  if (copy_) copy_storage(block, static_cast<std::uint8_t*>(c.tensor.data()) + base * dtype_size(block.dtype), stream_);
}

void CaptureTap::capture(std::size_t stage, std::size_t output, const TensorView& view) {
  Captured& c = captured_[slot(stage, output)];
  const Stage& st = graph_.stages[stage];
  const StageOutput& declared = st.outputs[output];
  if (results_only_ && !is_result(declared.quantity)) return;
  c.present = true;
  c.view = view;
  c.window = window_;
  const Dims want = declared_dims(stage, output);
  if (view.dims != want || view.dtype != declared.dtype) {
    c.problem = "captured " + std::string(dtype_name(view.dtype)) + " " + dims_string(view.dims) + ", declared " +
                dtype_name(declared.dtype) + " " + dims_string(want);
    return;
  }
  c.flags_of_extent = copy_ && problem_.layout.varlen();
  if (c.flags_of_extent) {
    c.tensor = copy_to_host(view, stream_);
    c.flags = flags_of_extent(c.tensor, view.buffer_id, st, declared);
    return;
  }
  if (view.on_device) {
    if (fused_rows_[slot(stage, output)].count(0) == 0) launch_flags(view, device_slot(slot(stage, output)), stream_);
  } else {
    c.flags = host_flags(view);
  }
  if (!copy_) return;
  if (device_headroom_ && view.on_device && row_major(view)) {
    if (buffers_ && view.buffer_id > 0) {
      c.resident = std::shared_ptr<const void>(buffers_, view.data);
      return;
    }
    const std::shared_ptr<const DeviceMemory> copy = device_copy(view, *device_headroom_, stream_);
    c.resident = copy ? std::shared_ptr<const void>(copy, copy->get()) : nullptr;
    if (c.resident) return;
  }
  c.tensor = copy_to_host(view, stream_);
}

void bring_to_host(std::vector<Captured>& captured) {
  for (Captured& c : captured) {
    if (!c.resident) continue;
    c.tensor = HostTensor(c.view.dtype, c.view.dims);
    FC_CUDA(cudaMemcpy(c.tensor.data(), c.resident.get(), c.tensor.nbytes(), cudaMemcpyDeviceToHost));
    c.resident.reset();  // a run kept for later holds no device memory
  }
}

FlagCounts CaptureTap::flags_of_extent(const HostTensor& logical, int buffer_id, const Stage& stage,
                                       const StageOutput& output) const {
  const Dims& d = logical.dims();
  const std::int64_t rows = d[2], cols = d.size() == 4 ? d[3] : 1;
  std::vector<Extent> extents;
  for (std::int64_t b = 0; b < d[0]; ++b) extents.push_back(existing_extent(problem_, graph_.algorithm, stage, output, b));
  TensorView view;
  view.data = logical.data();
  view.dtype = logical.dtype();
  view.dims = d;
  view.buffer_id = buffer_id;
  return host_flags(view, [&](std::int64_t i) {
    const Extent& e = extents[static_cast<std::size_t>(i / (d[1] * rows * cols))];
    return (i / cols) % rows < e.rows && i % cols < e.cols;
  });
}

void CaptureTap::reset() {
  for (Captured& c : captured_) {
    c.present = false;
    c.flags_of_extent = false;
    c.flags = FlagCounts{};
    c.tensor = HostTensor();
    c.resident.reset();
    c.problem.clear();
    c.window = RowWindow{};
  }
  fused_rows_.assign(captured_.size(), {});
  blocks_.assign(captured_.size(), {});
  in_blocks_.assign(captured_.size(), 0);
  if (device_flags_.get()) {
    const std::vector<FlagCounts> fresh(captured_.size());
    FC_CUDA(cudaMemcpyAsync(device_flags_.get(), fresh.data(), device_flags_.bytes(), cudaMemcpyHostToDevice, stream_));
  }
}

void CaptureTap::finish() {
  if (device_flags_.get()) {
    std::vector<FlagCounts> flags(captured_.size());
    FC_CUDA(cudaMemcpyAsync(flags.data(), device_flags_.get(), device_flags_.bytes(), cudaMemcpyDeviceToHost, stream_));
    FC_CUDA(cudaStreamSynchronize(stream_));
    for (std::size_t i = 0; i < captured_.size(); ++i) {
      const Captured& c = captured_[i];
      if (c.present && c.view.on_device && !c.flags_of_extent) captured_[i].flags = flags[i];
    }
  }
  for (std::size_t i = 0; i < captured_.size(); ++i) {
    Captured& c = captured_[i];
    if (!c.present || !c.problem.empty()) continue;
    if (!in_blocks_[i]) {
      if (!c.flags_of_extent) make_indices_logical(c);
      FlagCounts& f = c.flags;
      for (unsigned long long* first : {&f.first_nan, &f.first_inf, &f.first_unwritten}) {
        *first = unwindowed_index(*first, c.view.dims, problem_.shape.q_len, c.window);
      }
      if (f.first_foreign != kNoIndex) {  // (index << 8) | source
        f.first_foreign = (unwindowed_index(f.first_foreign >> 8, c.view.dims, problem_.shape.q_len, c.window) << 8) |
                          (f.first_foreign & 0xFF);
      }
      continue;
    }
    // Blocks (no two overlap): first indices are logical already (dense rows at their base).
    std::int64_t captured_rows = 0;
    for (const RowBlock& b : blocks_[i]) captured_rows += b.rows;
    const std::int64_t total_rows = row_count(c.view.dims);
    if (captured_rows != total_rows) {
      c.problem = "captured " + std::to_string(captured_rows) + " rows in blocks of " + std::to_string(total_rows);
    } else if (c.flags_of_extent) {
      const Stage& st = graph_.stages[c.stage];
      c.flags = flags_of_extent(c.tensor, c.view.buffer_id, st, st.outputs[c.output]);
    }
  }
}

}  // namespace fc

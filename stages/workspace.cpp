#include "stages/workspace.h"

#include <cstring>

#include "core/error.h"
#include "stages/device_kernels.h"

namespace fc {

TensorView Buffer::view(Dims dims, Dims strides) const {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.dims = std::move(dims);
  v.strides = std::move(strides);
  v.on_device = on_device;
  v.buffer_id = id;
  if (v.numel() > count) {
    throw Error("buffer '" + name + "' holds " + std::to_string(count) + " elements, a view of " +
                dims_string(v.dims) + " needs " + std::to_string(v.numel()));
  }
  return v;
}

TensorView Buffer::view_at(std::int64_t offset, Dims dims) const {
  TensorView v = view({0});
  v.dims = std::move(dims);
  if (offset < 0 || offset + v.numel() > count) {
    throw Error("buffer '" + name + "' holds " + std::to_string(count) + " elements, a view of " +
                dims_string(v.dims) + " from element " + std::to_string(offset) + " does not fit");
  }
  v.data = static_cast<const std::uint8_t*>(data) + offset * static_cast<std::int64_t>(dtype_size(dtype));
  return v;
}

Buffer& Workspace::allocate(const std::string& name, DType dtype, std::int64_t count) {
  if (storage_.size() >= static_cast<std::size_t>(kMaxPoisonId)) {
    throw Error("workspace: more than " + std::to_string(kMaxPoisonId) + " buffers");
  }
  Storage& s = storage_.emplace_back();
  s.buffer.id = static_cast<int>(storage_.size());
  s.buffer.name = name;
  s.buffer.dtype = dtype;
  s.buffer.count = count;
  s.buffer.on_device = on_device_;
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
  if (on_device_) {
    s.device = DeviceMemory(bytes);
    s.buffer.data = s.device.get();
  } else {
    s.host.assign(bytes, 0);
    s.buffer.data = s.host.data();
  }
  return s.buffer;
}

void Workspace::poison(cudaStream_t stream) {
  for (Storage& s : storage_) {
    const Buffer& b = s.buffer;
    if (b.dtype != DType::f32 && b.dtype != DType::f16 && b.dtype != DType::bf16) continue;
    if (on_device_) {
      launch_poison_fill(b.data, b.dtype, b.count, b.id, stream);
      continue;
    }
    const std::uint32_t pattern = poison_bits(b.dtype, b.id);
    auto* bytes = static_cast<std::uint8_t*>(b.data);
    const std::size_t width = dtype_size(b.dtype);
    for (std::int64_t i = 0; i < b.count; ++i) std::memcpy(bytes + i * width, &pattern, width);
  }
}

std::string Workspace::buffer_name(int id) const {
  if (id < 1 || static_cast<std::size_t>(id) > storage_.size()) return "unknown buffer " + std::to_string(id);
  return storage_[static_cast<std::size_t>(id - 1)].buffer.name;
}

std::size_t Workspace::bytes() const {
  std::size_t total = 0;
  for (const Storage& s : storage_) total += static_cast<std::size_t>(s.buffer.count) * dtype_size(s.buffer.dtype);
  return total;
}

}  // namespace fc

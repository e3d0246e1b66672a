#pragma once
// The buffers an implementation writes (outputs and workspaces), each with a name and a
// poison id. The harness poisons every buffer before each run, so unwritten elements and
// reads of memory nobody wrote can be told apart from computed values.
#include <cuda_runtime_api.h>

#include <deque>
#include <string>
#include <vector>

#include "stages/device_memory.h"
#include "stages/tensor_view.h"

namespace fc {

struct Buffer {
  int id = 0;
  std::string name;
  DType dtype = DType::f32;
  std::int64_t count = 0;
  bool on_device = false;
  void* data = nullptr;

  template <class T> T* as() const { return static_cast<T*>(data); }
  // A view of the first numel(dims) elements with the given strides (row-major if empty).
  TensorView view(Dims dims, Dims strides = {}) const;
  // A dense row-major view of numel(dims) elements from element `offset` on.
  TensorView view_at(std::int64_t offset, Dims dims) const;
};

class Workspace {
 public:
  explicit Workspace(bool on_device) : on_device_(on_device) {}

  // fp32, fp16 or bf16 buffers are poisoned; other types are allocated and left as they are.
  Buffer& allocate(const std::string& name, DType dtype, std::int64_t count);
  void poison(cudaStream_t stream);
  std::string buffer_name(int id) const;
  bool on_device() const { return on_device_; }
  std::size_t bytes() const;
  int buffer_count() const { return static_cast<int>(storage_.size()); }

 private:
  struct Storage {
    Buffer buffer;
    DeviceMemory device;
    std::vector<std::uint8_t> host;
  };
  bool on_device_;
  std::deque<Storage> storage_;  // stable addresses for the Buffer references handed out
};

}  // namespace fc

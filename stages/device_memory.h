#pragma once
// RAII owners of CUDA resources: the destructor frees, moves transfer, copies are deleted.
// Destructors ignore the status of the free (they cannot throw); every acquiring call is
// checked.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "core/check.h"
#include "core/resource_usage.h"

namespace fc {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) {
      FC_CUDA(cudaMalloc(&ptr_, bytes));
      count_device_allocation(static_cast<std::int64_t>(bytes));
    }
  }
  ~DeviceMemory() { release(); }
  DeviceMemory(DeviceMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept {
    if (!ptr_) return;
    cudaFree(ptr_);
    count_device_allocation(-static_cast<std::int64_t>(bytes_));
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class CudaStream {
 public:
  CudaStream() { FC_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  CudaStream(CudaStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&&) = delete;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const { FC_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() { FC_CUDA(cudaEventCreate(&event_)); }
  ~CudaEvent() {
    if (event_) cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t s) { FC_CUDA(cudaEventRecord(event_, s)); }
  // Milliseconds from `start` to this event (both recorded and complete).
  float since(const CudaEvent& start) const {
    FC_CUDA(cudaEventSynchronize(event_));
    float ms = 0;
    FC_CUDA(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// True when a CUDA device can be used; `why` says why not.
bool cuda_device_available(std::string* why = nullptr);

}  // namespace fc

#pragma once
// Stream-ordered device allocation for the GPU reference. A host thread that owns a memory
// pool (OwnPool::use, one per evaluator thread) allocates from it, so that threads judging
// different heads never contend for one pool's lock; any other thread, or one whose pool is
// gone, allocates from the device's default pool. Freeing is cudaFreeAsync either way.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace fc::gpu {

void* allocate_async(std::size_t bytes, cudaStream_t stream);

class OwnPool {
 public:
  OwnPool();  // a pool on the current device that keeps what is freed (no release threshold)
  ~OwnPool();
  OwnPool(const OwnPool&) = delete;
  OwnPool& operator=(const OwnPool&) = delete;
  // The calling thread allocates from this pool from now on.
  void use() const;

 private:
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace fc::gpu

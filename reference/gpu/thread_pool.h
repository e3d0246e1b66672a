#pragma once
// Stream-ordered device allocation for the GPU reference. A host thread that took a memory
// pool (OwnPool::use, one per evaluator thread) allocates from it from then on, so that
// threads judging different heads never contend for one pool's lock. A thread that never took
// one, or whose pool's generation has passed (any OwnPool destroyed since, which happens when
// the evaluators go), allocates from the device's default pool. Freeing is cudaFreeAsync
// either way; a pool destroyed with allocations still out gives its memory back once they are
// freed (cudaMemPoolDestroy).
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
  // Device memory every live pool holds, in use or kept for reuse.
  static std::size_t reserved_bytes();

 private:
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace fc::gpu

#include "reference/gpu/thread_pool.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>

#include "core/check.h"

namespace fc::gpu {
namespace {

// Bumped whenever a pool is destroyed: a thread's pool of an older generation is not used.
std::atomic<std::uint64_t> generation{0};

struct ThreadPool {
  cudaMemPool_t pool = nullptr;
  std::uint64_t generation = 0;
};
thread_local ThreadPool current;

// Every live pool, for the memory they hold (reserved_bytes).
std::mutex live_mutex;
std::set<cudaMemPool_t> live;

}  // namespace

void* allocate_async(std::size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  if (current.pool && current.generation == generation.load()) {
    FC_CUDA(cudaMallocFromPoolAsync(&p, bytes, current.pool, stream));
  } else {
    FC_CUDA(cudaMallocAsync(&p, bytes, stream));
  }
  return p;
}

OwnPool::OwnPool() {
  int device = 0;
  FC_CUDA(cudaGetDevice(&device));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  FC_CUDA(cudaMemPoolCreate(&pool_, &props));
  std::uint64_t keep = UINT64_MAX;
  FC_CUDA(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
  const std::lock_guard<std::mutex> lock(live_mutex);
  live.insert(pool_);
}

OwnPool::~OwnPool() {
  generation.fetch_add(1);  // no thread allocates from this pool, or any other, after this
  {
    const std::lock_guard<std::mutex> lock(live_mutex);
    live.erase(pool_);
  }
  // Allocations still out (freed in stream order on some stream) hold its memory until they
  // are freed; the rest goes back now.
  cudaMemPoolDestroy(pool_);
}

std::size_t OwnPool::reserved_bytes() {
  const std::lock_guard<std::mutex> lock(live_mutex);
  std::size_t total = 0;
  for (cudaMemPool_t pool : live) {
    std::uint64_t bytes = 0;
    FC_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &bytes));
    total += static_cast<std::size_t>(bytes);
  }
  return total;
}

void OwnPool::use() const { current = {pool_, generation.load()}; }

}  // namespace fc::gpu

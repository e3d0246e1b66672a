#include "tests/gpu/shared_memory_reader.h"

#include "core/check.h"

namespace fc::test {
namespace {
// Copies `words` of its dynamic shared memory, never written, to out: what a kernel that reads
// before the write it waits for would see.
__global__ void read_unwritten_shared(unsigned* out, unsigned words) {
  extern __shared__ unsigned shared[];
  volatile unsigned* s = shared;
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) out[blockIdx.x * words + i] = s[i];
}
}  // namespace

void launch_read_unwritten_shared(unsigned* out, int blocks, unsigned words, cudaStream_t stream) {
  read_unwritten_shared<<<blocks, 128, words * sizeof(unsigned), stream>>>(out, words);
  FC_CUDA_LAUNCH();
}

}  // namespace fc::test

#pragma once
#include <cuda_runtime_api.h>

namespace fc::test {
// `blocks` blocks each copy their first `words` words of (unwritten) shared memory to out.
void launch_read_unwritten_shared(unsigned* out, int blocks, unsigned words, cudaStream_t stream);
}  // namespace fc::test

#pragma once
// A parallel loop over independent items (heads, mostly) with OpenMP that carries the first
// exception out of the parallel region instead of terminating the process.
#include <cstdint>
#include <algorithm>
#include <exception>
#include <type_traits>

#include <omp.h>

namespace fc {

// How many threads parallel_for runs with `max_threads` (> 0: a cap): the bound on the
// `thread` it passes.
inline int parallel_threads(int max_threads = 0) {
  return max_threads > 0 ? std::min(max_threads, omp_get_max_threads()) : omp_get_max_threads();
}

// `max_threads` > 0 caps the threads that run at once. body(item), or body(item, thread) with
// thread in [0, parallel_threads(max_threads)): what a thread accumulates apart.
template <class Body>
void parallel_for(std::int64_t count, Body&& body, int max_threads = 0) {
  std::exception_ptr error;
  const int threads = parallel_threads(max_threads);
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t i = 0; i < count; ++i) {
    try {
      if constexpr (std::is_invocable_v<Body&, std::int64_t, int>) {
        body(i, omp_get_thread_num());
      } else {
        body(i);
      }
    } catch (...) {
#pragma omp critical(fc_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace fc

#pragma once
// A parallel loop over independent items (heads, mostly) with OpenMP that carries the first
// exception out of the parallel region instead of terminating the process.
#include <cstdint>
#include <algorithm>
#include <exception>

#include <omp.h>

namespace fc {

// `max_threads` > 0 caps the threads that run at once.
template <class Body>
void parallel_for(std::int64_t count, Body&& body, int max_threads = 0) {
  std::exception_ptr error;
  const int threads = max_threads > 0 ? std::min(max_threads, omp_get_max_threads()) : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t i = 0; i < count; ++i) {
    try {
      body(i);
    } catch (...) {
#pragma omp critical(fc_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace fc

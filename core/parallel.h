#pragma once
// A parallel loop over independent items (heads, mostly) with OpenMP that carries the first
// exception out of the parallel region instead of terminating the process.
#include <cstdint>
#include <exception>

namespace fc {

template <class Body>
void parallel_for(std::int64_t count, Body&& body) {
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic)
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

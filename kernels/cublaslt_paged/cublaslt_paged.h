#pragma once
#include <cstdint>
#include <memory>

#include "kernels/implementation.h"

namespace fc {

// How cublaslt-paged walks the problem: pages of keys, within groups of K/V heads (all pages
// of a group before the next).
struct PagedSchedule {
  std::int64_t page_width = 128;
  std::int64_t max_group_rows = 0;  // query rows of a group at most (whole K/V heads); 0: one group
};

std::unique_ptr<Implementation> make_cublaslt_paged(PagedSchedule schedule = {});

}  // namespace fc

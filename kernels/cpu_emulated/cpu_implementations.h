#pragma once
#include <memory>

#include "kernels/implementation.h"

namespace fc {
std::unique_ptr<Implementation> make_cpu_full();
std::unique_ptr<Implementation> make_cpu_paged();
}  // namespace fc

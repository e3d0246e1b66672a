#pragma once
#include <memory>

#include "kernels/implementation.h"

namespace fc {
std::unique_ptr<Implementation> make_cublaslt_paged();
}  // namespace fc

#pragma once
#include <memory>

#include "kernels/implementation.h"

namespace fc {
std::unique_ptr<Implementation> make_fa1_scalar();
}  // namespace fc

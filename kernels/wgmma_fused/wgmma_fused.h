#pragma once
#include <memory>

#include "kernels/implementation.h"

namespace fc {
std::unique_ptr<Implementation> make_wgmma_fused();
}  // namespace fc

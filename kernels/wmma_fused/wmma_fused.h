#pragma once
#include <memory>

#include "kernels/implementation.h"
#include "kernels/wmma_fused/flash_params.h"

namespace fc {
class DeviceInputs;
std::unique_ptr<Implementation> make_wmma_fused();
// The launch parameters every user of the fused kernel starts from.
FlashParams flash_params(const Problem& problem, const DeviceInputs& inputs);
}  // namespace fc

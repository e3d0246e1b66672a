#pragma once
#include <memory>

#include "kernels/implementation.h"
#include "kernels/wmma_fused/flash_params.h"

namespace fc {
class DeviceInputs;
struct FusedTraceBuffers;
std::unique_ptr<Implementation> make_wmma_fused();
// The launch parameters every user of the fused kernel starts from.
FlashParams flash_params(const Problem& problem, const DeviceInputs& inputs);
// Where a trace build writes its tiles: the trace buffers the harness allocated.
FlashTrace flash_trace(const FusedTraceBuffers& buffers);
}  // namespace fc

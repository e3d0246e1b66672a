#pragma once
// The FP64 reference on the GPU: an EvaluatorSource whose head evaluators compute every
// stage function of stage_eval.h with cuBLAS DGEMM and the shared element and row math
// (stage_math.h) on the device. Each host thread that asks gets its own CUDA stream and
// cuBLAS handle, so heads judged in parallel run concurrently on the device.
#include <cstddef>
#include <memory>

#include "reference/evaluator.h"

namespace fc {

// Throws fc::Error when no CUDA device can be used.
std::unique_ptr<EvaluatorSource> gpu_evaluators();

// Device memory the GPU reference may hold at once: the FP64 tensors of the blocks it judges
// concurrently and the heads' K and V it keeps (what a run's device copies of its captures must
// leave free).
std::size_t gpu_reference_working_bytes();

}  // namespace fc

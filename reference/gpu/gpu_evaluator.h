#pragma once
// The FP64 reference on the GPU: an EvaluatorSource whose head evaluators compute every
// stage function of stage_eval.h with cuBLAS DGEMM and the shared element and row math
// (stage_math.h) on the device. Each host thread that asks gets its own CUDA stream and
// cuBLAS handle, so heads judged in parallel run concurrently on the device.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "reference/evaluator.h"

namespace fc {

// For heads of at most `head_dim` (how many blocks it judges at once and how much memory that
// takes depend on it). Throws fc::Error when no CUDA device can be used.
std::unique_ptr<EvaluatorSource> gpu_evaluators(std::int64_t head_dim);

// Device memory the GPU reference may hold at once for heads of `head_dim`: the FP64 tensors of
// the blocks it judges concurrently and the heads' K and V it keeps (what a run's device copies
// of its captures must leave free).
std::size_t gpu_reference_working_bytes(std::int64_t head_dim);
// Device memory the GPU reference's live evaluators hold now (their pools keep what blocks free
// for the next blocks): the part of its working set it needs no more room for.
std::size_t gpu_reference_reserved_bytes();

}  // namespace fc

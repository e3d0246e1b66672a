#pragma once
// What a bug report's inputs say before any kernel runs (CPU, FP64): NaN/Inf in an input,
// fully masked rows, rows masked by a finite bias (Hugging Face's finfo.min masks), scores
// past the fp16 range before or after scaling, rows whose exp would overflow fp32 without the
// max subtracted, rows whose lse is beyond +-88.7, subnormal inputs, values lost converting
// to the kernels' format.
#include <string>
#include <vector>

#include "core/problem.h"
#include "reports/input_finding.h"

namespace fc {

// kernel_dtype: the format the kernels get the inputs in (values lost converting to it).
std::vector<InputFinding> find_input_problems(const AttentionInputs& inputs, DType kernel_dtype);

// The same case with q, k, v rounded to `dtype` (fp16 or bf16), as the kernels get it.
AttentionInputs for_kernels(const AttentionInputs& inputs, DType dtype);

}  // namespace fc

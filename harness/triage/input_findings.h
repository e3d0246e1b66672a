#pragma once
// What a bug report's inputs say before any kernel runs (CPU, FP64): NaN/Inf in an input,
// fully masked rows, scores past the fp16 range before or after scaling, rows whose exp
// would overflow fp32 without the max subtracted, subnormal inputs, values lost converting
// to the kernels' format.
#include <string>
#include <vector>

#include "core/problem.h"

namespace fc {

struct InputFinding {
  std::string id;        // input-nan, input-inf, fully-masked-rows, score-overflow-unscaled,
                         // score-overflow, exp-overflow-risk, subnormal-inputs, conversion-overflow
  std::string evidence;  // one sentence with the numbers and the first place
  bool defect = false;   // the inputs themselves are wrong (NaN, Inf, values lost)
};

// kernel_dtype: the format the kernels get the inputs in (values lost converting to it).
std::vector<InputFinding> find_input_problems(const AttentionInputs& inputs, DType kernel_dtype);

// The same case with q, k, v rounded to `dtype` (fp16 or bf16), as the kernels get it.
AttentionInputs for_kernels(const AttentionInputs& inputs, DType dtype);

}  // namespace fc

#pragma once
// `check --arithmetic`: how the kernel that produced a captured output computes, so that its
// outputs are judged under the bounds of that arithmetic (docs/error-model.md). A list of
// items joined by ',': a preset, then keys overriding it.
//   presets  fp16-fp32acc, bf16-fp32acc  fp16/bf16 inputs on tensor cores, fp32 accumulation,
//                                        probabilities rounded to the input format for P.V
//            fp16-fp16acc                the same with an fp16 accumulator
//            fp32                        fp32 everywhere, no tensor cores
//   keys     input=F accumulate=F scores=F probs=F output=F (F: fp16, bf16, fp32),
//            tensor-cores=yes|no
// A format not given comes from the file: the inputs' dtype, the stored tensors' dtypes,
// scores in fp32, probabilities in the input format, fp32 accumulation, tensor cores for
// fp16/bf16 inputs.
#include <optional>
#include <string>

#include "core/dtype.h"

namespace fc {

struct ArithmeticSpec {
  std::optional<DType> input, accumulate, scores, probs, output;
  std::optional<bool> tensor_cores;
};

// An fc::Error "--arithmetic 'TEXT': ..." naming the item it cannot read.
ArithmeticSpec parse_arithmetic(const std::string& text);

// One line for --help.
std::string arithmetic_help();

}  // namespace fc

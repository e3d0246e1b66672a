#pragma once
// A kernel's captured outputs judged as an implementation: its stage graph is the full
// algorithm (split-KV when per-split partials are given) with only the tensors the capture
// holds, and the arithmetic the user declares; run() copies the tensors into the buffers the
// harness poisoned and hands them to the tap. Everything after the tap (comparison,
// attribution, reports) is what --trace does.
#include <memory>

#include "harness/check/arithmetic_spec.h"
#include "harness/io/capture_file.h"
#include "kernels/implementation.h"

namespace fc {

// Checks every tensor against the inputs (shape, dtype, the declared formats) and throws
// one fc::Error naming `capture.path` and the tensor when they disagree, or when the
// capture holds nothing to check.
std::unique_ptr<Implementation> make_captured_implementation(const AttentionInputs& inputs, const CaptureFile& capture,
                                                             const ArithmeticSpec& spec);

}  // namespace fc

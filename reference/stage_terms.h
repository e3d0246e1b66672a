#pragma once
// The constants a stage's declared arithmetic gives the shared element and row math
// (reference/stage_math.h): unit roundoffs, absolute floors and overflow thresholds of its
// formats, computed on the host for the Eigen and the GPU reference alike.
#include <cstdint>

#include "reference/stage_eval.h"
#include "reference/stage_math.h"

namespace fc {

stage_math::OutputTerms output_terms(const Arithmetic& a);
stage_math::QkTerms qk_terms(const Arithmetic& a, std::int64_t head_dim, double scale, double softcap);
// p v over `keys` keys with p stored in `p_format`.
stage_math::PvTerms pv_terms(const Arithmetic& a, DType p_format, std::int64_t keys);
// The range cap of an output stored in `out` that P.V (arithmetic pv) summed over `keys` keys.
stage_math::RangeTerms range_terms(const Arithmetic& pv, DType out, std::int64_t keys);

// The smallest size a nonzero operand has in the accumulation: a tensor core aligns products
// by their operands' exponents, and a subnormal operand counts with the smallest normal
// exponent of the operand format (docs/error-model.md, "Tensor cores"); 0 without them.
double nominal_floor(const Arithmetic& a);

// The smallest positive x that format t stores as inf (inf for fp64).
double overflow_threshold(DType t);

}  // namespace fc

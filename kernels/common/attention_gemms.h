#pragma once
// The two cuBLASLt matmuls of unfused attention, strided-batched over the B*Hkv K/V heads, for
// a range of `keys` keys (a page, or all of them). The G = H/Hkv query heads of one K/V head
// (GQA) lie next to each other in q, the scores and the output, so they are one matrix of
// G*Sq rows against that head's K and V. cuBLASLt is column-major: our row-major [R x C] is
// its [C x R] with ld = C.
//   qk: S^T [keys x G*Sq] = op(K) Q^T, K stored [D x keys] (ld D) and transposed, Q [D x G*Sq]
//   pv: O^T [D x G*Sq] = V^T P^T, V stored [D x keys] (ld D), P [keys x G*Sq] (ld keys)
#include <optional>
#include <string>

#include "kernels/common/lt_gemm.h"
#include "kernels/implementation.h"

namespace fc {

GemmConfig qk_gemm(const Problem& problem, std::int64_t keys, DType scores);
GemmConfig pv_gemm(const Problem& problem, std::int64_t keys, DType out);

// Why the cuBLASLt implementations cannot run a problem, if they cannot.
std::optional<std::string> lt_unsupported(const Problem& problem);

}  // namespace fc

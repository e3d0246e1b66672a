#pragma once
// The two cuBLASLt matmuls of unfused attention, strided-batched over the B*H heads, for a
// range of `keys` keys (a page, or all of them). cuBLASLt is column-major: our row-major
// [R x C] is its [C x R] with ld = C.
//   qk: S^T [keys x Sq] = op(K) Q^T, K stored [D x keys] (ld D) and transposed, Q [D x Sq]
//   pv: O^T [D x Sq] = V^T P^T, V stored [D x keys] (ld D), P [keys x Sq] (ld keys)
#include "kernels/common/lt_gemm.h"
#include "kernels/implementation.h"

namespace fc {

GemmConfig qk_gemm(const Problem& problem, std::int64_t keys, DType scores);
GemmConfig pv_gemm(const Problem& problem, std::int64_t keys, DType out);

}  // namespace fc

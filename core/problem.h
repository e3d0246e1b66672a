#pragma once
// What one attention case is: shapes, element type, scale, mask, and the input tensors.
// Layout of every tensor is [batch, heads, rows, cols] row-major:
//   q [B,H,Sq,D], k and v [B,H,Sk,D], scores and probabilities [B,H,Sq,Sk], output [B,H,Sq,D].
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fc {

struct Shape {
  std::int64_t batch = 1, heads = 1, q_len = 1, kv_len = 1, head_dim = 64;
  std::string to_string() const;  // "B2 H4 Sq128 Sk96 D64"
  bool operator==(const Shape& o) const;
};

// Causal alignment: top-left keeps key j for query i when j <= i (PyTorch's is_causal);
// bottom-right when j <= i + (Sk - Sq), so the last query sees every key.
enum class Causal : std::uint8_t { none, top_left, bottom_right };

// The mask is a sum of independent parts, each optional; a key is attended when every
// part allows it, and the additive bias (if any) is added to its score.
struct Mask {
  Causal causal = Causal::none;
  std::vector<std::int32_t> key_lengths;  // empty, or one per batch: keys >= length are masked
  // empty, or [Bm,Hm,Sq,Sk] with Bm in {1,B}, Hm in {1,H}: boolean (true = attend, as
  // PyTorch SDPA) or floating (additive bias, -inf allowed).
  HostTensor dense;

  bool has_dense() const { return !dense.empty(); }
  bool dense_is_bias() const { return has_dense() && dense.dtype() != DType::boolean; }
  std::string describe() const;  // "none", "causal", "causal-br+padding+bias", ...
};

struct Problem {
  Shape shape;
  DType dtype = DType::f16;  // element type of q, k, v as the kernels get them
  double scale = 0;          // multiplies q.k; 1/sqrt(D) unless the case says otherwise
  Mask mask;
};

struct AttentionInputs {
  Problem problem;
  HostTensor q, k, v;  // in problem.dtype
  std::string source;  // "seed 7, dist normal" or the file the case came from
};

// Additive mask term for one score: 0 when attended, -inf when masked, or the bias value.
double mask_bias(const Mask& mask, const Shape& shape, std::int64_t b, std::int64_t h,
                 std::int64_t i, std::int64_t j);

// Throws fc::Error naming `origin` if shapes, dtypes or mask parts disagree.
void validate(const AttentionInputs& in, const std::string& origin);

double default_scale(std::int64_t head_dim);

}  // namespace fc

#pragma once
// Seeded, reproducible attention inputs: the same case spec gives the same bits on any
// machine (core/rng.h uses no libm).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"

namespace fc {

struct CaseSpec {
  Shape shape;
  DType dtype = DType::f16;
  std::string mask = "none";  // parts joined by '+', see mask_help(): mask, softcap, layout
  std::string dist = "normal";
  std::uint64_t seed = 0;
  std::optional<double> scale;  // default 1/sqrt(D)

  std::string label() const;  // "B2 H4 S128 D64 fp16 causal normal seed 1"
};

// "B,H,S,D" or "B,H,Sq,Sk,D", H as "Hq:Hkv" for GQA/MQA; throws fc::Error naming the text.
Shape parse_shape(const std::string& text);
// "B,H,Sq,Sk,D" (H as "Hq:Hkv" when they differ): what parse_shape reads back as `shape`.
std::string shape_argument(const Shape& shape);

const std::vector<std::string>& distribution_names();  // normal uniform large outlier tiny
std::string mask_help();

// Throws fc::Error on an unknown distribution or mask part.
AttentionInputs generate_inputs(const CaseSpec& spec);
// The problem of a spec (shape, dtype, scale, mask) without drawing q, k and v; the same
// errors as generate_inputs.
Problem make_problem(const CaseSpec& spec);

// What a --mask spec describes: the mask parts, the softcap and the input layout.
struct MaskSpec {
  Mask mask;
  double softcap = 0;
  Layout layout;
};
// Throws fc::Error naming the spec for an unknown or malformed part. `dtype`: the input
// format (masked-bias=min is its most negative finite value, as torch.finfo(dtype).min).
MaskSpec parse_mask_spec(const std::string& spec, const Shape& shape, DType dtype, std::uint64_t seed);
// The mask of a spec alone (the part of generate_inputs that draws it).
Mask make_mask(const std::string& spec, const Shape& shape, std::uint64_t seed);

}  // namespace fc

#include "harness/plan.h"

#include "core/error.h"

namespace fc {

std::vector<CaseSpec> default_cases() {
  struct Row {
    Shape shape;
    DType dtype;
    const char* mask;
    const char* dist;
  };
  const Row rows[] = {
      {{2, 4, 128, 128, 64}, DType::f16, "none", "normal"},
      {{2, 2, 200, 200, 64}, DType::f16, "causal", "uniform"},
      {{1, 2, 100, 260, 128}, DType::bf16, "causal-br", "normal"},
      {{2, 2, 96, 300, 64}, DType::f16, "padding=0,300", "normal"},  // batch 0 has no key at all
      {{1, 4, 77, 77, 128}, DType::bf16, "bias", "outlier"},
      {{1, 2, 130, 190, 64}, DType::f16, "bool+masked-rows", "normal"},
      {{1, 2, 128, 128, 64}, DType::f16, "none", "large"},
      {{1, 1, 64, 64, 64}, DType::f16, "causal", "tiny"},
      {{1, 1, 64, 64, 64}, DType::bf16, "none", "tiny"},
      // The attention people run: GQA with a sliding window and softcap, ALiBi at D 96,
      // variable lengths (one empty) in a paged KV cache, a Hugging Face finite mask.
      {{2, 4, 150, 150, 128, 2}, DType::bf16, "causal-br+window=64,0+softcap=30", "normal"},
      {{1, 4, 100, 180, 96}, DType::f16, "causal-br+alibi", "normal"},
      {{3, 4, 90, 200, 64, 1}, DType::f16, "varlen=90:200,0:30,33:97+paged=16+causal-br", "normal"},
      {{2, 2, 70, 70, 32}, DType::f16, "causal+padding=0,70+masked-bias=min", "normal"},
  };
  std::vector<CaseSpec> cases;
  std::uint64_t seed = 1;
  for (const Row& r : rows) {
    CaseSpec c;
    c.shape = r.shape;
    c.dtype = r.dtype;
    c.mask = r.mask;
    c.dist = r.dist;
    c.seed = seed++;
    cases.push_back(c);
  }
  return cases;
}

std::vector<CaseSpec> plan_cases(const PlanOptions& o) {
  const bool any = !o.shapes.empty() || !o.masks.empty() || !o.dtypes.empty() || !o.dists.empty() || !o.seeds.empty();
  if (!any) {
    std::vector<CaseSpec> cases = default_cases();
    for (CaseSpec& c : cases) c.scale = o.scale;
    return cases;
  }
  std::vector<Shape> shapes;
  for (const std::string& s : o.shapes) shapes.push_back(parse_shape(s));
  if (shapes.empty()) shapes.push_back({2, 4, 128, 128, 64});
  std::vector<DType> dtypes;
  for (const std::string& d : o.dtypes) {
    const std::optional<DType> t = parse_dtype(d);
    if (!t || (*t != DType::f16 && *t != DType::bf16)) throw Error("--dtype '" + d + "': expected fp16 or bf16");
    dtypes.push_back(*t);
  }
  if (dtypes.empty()) dtypes.push_back(DType::f16);
  const std::vector<std::string> masks = o.masks.empty() ? std::vector<std::string>{"none"} : o.masks;
  const std::vector<std::string> dists = o.dists.empty() ? std::vector<std::string>{"normal"} : o.dists;
  const std::vector<std::uint64_t> seeds = o.seeds.empty() ? std::vector<std::uint64_t>{1} : o.seeds;

  std::vector<CaseSpec> cases;
  for (const Shape& shape : shapes)
    for (DType dtype : dtypes)
      for (const std::string& mask : masks)
        for (const std::string& dist : dists)
          for (std::uint64_t seed : seeds) {
            CaseSpec c;
            c.shape = shape;
            c.dtype = dtype;
            c.mask = mask;
            c.dist = dist;
            c.seed = seed;
            c.scale = o.scale;
            cases.push_back(c);
          }
  for (const CaseSpec& c : cases) make_problem(c);  // a bad mask or distribution refused before any case runs
  return cases;
}

}  // namespace fc

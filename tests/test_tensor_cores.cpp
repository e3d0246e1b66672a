// The tensor-core accumulation model (kernels/cpu_emulated/tensor_core_sum.h) against a
// result an H100 really computed: cuBLASLt's P~.V over the 18-key last page of a
// cublaslt-paged run on subnormal fp16 V (tests/data/extract_pv_tail.py says which run).
// The model must reproduce it bit for bit, and the pv bound must hold for it.
#include <string>

#include "catch.h"
#include "harness/io/npz.h"
#include "kernels/cpu_emulated/emulate.h"

namespace fc {
namespace {

struct PvPage {
  std::vector<MatrixR> p, v, acc, out;  // per head: p~ [rows, keys], v [keys, D], acc and out [rows, D]
};

MatrixR head_block(const HostTensor& t, std::int64_t head) {
  const std::int64_t rows = t.dims()[1], cols = t.dims()[2];
  MatrixR m(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) m(r, c) = t.get((head * rows + r) * cols + c);
  }
  return m;
}

PvPage load_h100_page() {
  const auto arrays = read_npz(std::string(FC_TEST_DATA_DIR) + "/h100_pv_tail.npz");
  const HostTensor& p = arrays.at("p").tensor;
  REQUIRE(p.dtype() == DType::f16);
  REQUIRE(arrays.at("v").tensor.dtype() == DType::f16);
  REQUIRE(arrays.at("out").tensor.dtype() == DType::f32);
  PvPage page;
  for (std::int64_t h = 0; h < p.dims()[0]; ++h) {
    page.p.push_back(head_block(p, h));
    page.v.push_back(head_block(arrays.at("v").tensor, h));
    page.acc.push_back(head_block(arrays.at("acc").tensor, h));
    page.out.push_back(head_block(arrays.at("out").tensor, h));
  }
  return page;
}

std::int64_t count_differing(const MatrixR& a, const MatrixR& b) { return (a.array() != b.array()).count(); }

}  // namespace

TEST_CASE("the tensor-core model reproduces an H100 cuBLASLt P~.V bit for bit", "[bounds][tensor-cores]") {
  const PvPage page = load_h100_page();
  REQUIRE(page.p.size() == 2);
  std::int64_t elements = 0, model_misses = 0, fma_chain_misses = 0;
  for (std::size_t h = 0; h < page.p.size(); ++h) {
    const MatrixR model = emu::pv(page.p[h], page.v[h], &page.acc[h], DType::f16, DType::f32, true);
    const MatrixR fma_chain = emu::pv(page.p[h], page.v[h], &page.acc[h], DType::f16, DType::f32, false);
    elements += model.size();
    model_misses += count_differing(model, page.out[h]);
    fma_chain_misses += count_differing(fma_chain, page.out[h]);
  }
  CHECK(elements == 2 * 125 * 64);
  CHECK(model_misses == 0);
  // The data tells the models apart: an IEEE fp32 FMA chain gets many elements wrong.
  CHECK(fma_chain_misses > elements / 20);
}

TEST_CASE("the tensor-core pv bound holds for the H100 result and is not loose there", "[bounds][tensor-cores]") {
  const PvPage page = load_h100_page();
  Arithmetic a;
  a.out = DType::f32;
  a.operand = DType::f16;
  a.tensor_cores = true;
  double worst = 0;
  for (std::size_t h = 0; h < page.p.size(); ++h) {
    const Bounded acc = Bounded::exact(page.acc[h], DType::f32);
    const Bounded ref = eval_pv(Bounded::exact(page.p[h], DType::f16), page.v[h], &acc, a);
    const MatrixR ratio = (page.out[h] - ref.value).cwiseAbs().cwiseQuotient(ref.bound);
    worst = std::max(worst, ratio.maxCoeff());
  }
  INFO("largest error / bound " << worst);
  CHECK(worst <= 1.0);
  // Measured 0.012: over 18 subnormal products the nominal-size rule is a worst case that
  // random truncations do not reach; the floor keeps the bound from becoming vacuous.
  CHECK(worst >= 0.01);
}

}  // namespace fc

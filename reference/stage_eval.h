#pragma once
// One evaluation function per stage kind. Each takes its inputs as bounded values (an FP64
// value and two absolute error bounds per element) and returns its outputs the same way:
//   value = the stage's function of the input values, in FP64;
//   bound = propagated input error (first-order sensitivity, exact)
//         + kSafetyFactor x the rounding the stage's own arithmetic may add (worst case);
//   tight = the same propagation of the inputs' tight bounds
//         + the stage's own rounding with every sum of many roundings taken at its
//           probabilistic size (kTightLambda x sqrt(n), Higham & Mary), never above bound.
// The end-to-end reference chains these from the exact inputs (zero input bounds); the
// stage-local reference applies the same function to the kernel's own previous outputs
// with zero input bounds, which isolates the stage's own error. docs/error-model.md has
// the derivation of every term; the element and row arithmetic is stage_math.h's, shared
// with the GPU reference.
//
// Conventions (the kernels are judged against them):
//   masked score            -inf
//   fully masked row        max = -inf, sum = 0, probabilities 0, output 0, lse = -inf
//   rescale before any key  r = 0 (the running max was -inf)
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/head_mask.h"
#include "reference/matrix.h"
#include "reference/stage_math.h"

namespace fc {

// The one safety factor on rounding terms and lambda of the tight bound (stage_math.h).
inline constexpr double kSafetyFactor = stage_math::kSafetyFactor;
inline constexpr double kTightLambda = stage_math::kTightLambda;

// How a stage computes. Accumulation is fp32 in every kernel of this project; a captured
// output (`check --arithmetic`) may declare an fp16 accumulator for its matmuls.
struct Arithmetic {
  DType out = DType::f32;      // format the stage stores its main result in
  DType operand = DType::f32;  // format matrix operands are rounded to inside the stage
  DType accumulate = DType::f32;  // format the qk and pv matmuls accumulate in
  // Products summed by tensor cores (HMMA): their fp32 accumulation aligns to the largest
  // exponent and truncates, up to 2u an addition instead of IEEE round-to-nearest's u, and
  // a subnormal operand is aligned as if it were the smallest normal number of `operand`
  // (docs/error-model.md, "Tensor cores").
  bool tensor_cores = false;
};

namespace gpu {
struct DeviceBounded;
}

struct Bounded {
  MatrixR value;
  MatrixR bound;                 // worst-case absolute error bound, same shape as value (empty: exact)
  MatrixR tight;                 // tight (probabilistic) absolute error bound, <= bound (empty: exact)
  DType format = DType::f64;     // format the value is stored in (f64: exact)
  // The same three matrices on the GPU, where a GPU evaluator computed them (evaluator.h):
  // then value, bound and tight are empty until HeadEvaluator::to_host reads them back.
  // Shared by copies; never written after it is made.
  std::shared_ptr<const gpu::DeviceBounded> device;

  bool on_device() const { return device != nullptr; }
  // No bound matrices: every bound is 0 (a kernel's own values, a constant), as exact() makes.
  bool exact() const;
  // Of either residence.
  std::int64_t rows() const;
  std::int64_t cols() const;

  // `value` with zero error: bound and tight are left empty rather than filled with zeros.
  static Bounded exact(MatrixR value, DType format = DType::f64);
};

// The mask of a head's query rows, for the evaluation to read where it runs instead of a
// bias matrix: row r of the inputs is the head's query row rows[r] (r itself when empty);
// dense: the problem's dense mask part, when it has one.
struct MaskedRows {
  HeadMask mask;
  std::vector<std::int64_t> rows;
  const HostTensor* dense = nullptr;

  std::int64_t row(std::int64_t r) const { return rows.empty() ? r : rows[static_cast<std::size_t>(r)]; }
  double dense_value(std::int64_t r, std::int64_t j) const;
};

// A head's K and V in FP64, [Sk,D] each, which the HeadInputs of its blocks of rows share.
struct KvMatrices {
  MatrixR k, v;
};

// One head's inputs in FP64: q [Sq,D], k and v [Sk,D] (its K/V head's), the bias of each
// (row, key) (0, -inf or bias) as a matrix [Sq,Sk], or, with the matrix empty, as the mask
// of the rows (no Sq x Sk FP64 matrix is formed on the host; a GPU forms its blocks there).
struct HeadInputs {
  MatrixR q;
  MatrixR bias;
  std::shared_ptr<const MaskedRows> masked_rows;  // null: bias is the matrix
  // Nonzero: k and v are those of every HeadInputs with this id (blocks of one head's rows),
  // which a GPU evaluator uploads once.
  std::uint64_t kv_id = 0;
  double scale = 1;
  double softcap = 0;  // > 0: the scores are soft-capped before the bias

  const MatrixR& k() const { return kv_ ? kv_->k : no_matrix(); }
  const MatrixR& v() const { return kv_ ? kv_->v : no_matrix(); }
  const std::shared_ptr<const KvMatrices>& kv() const { return kv_; }
  // K and V shared with others (kv_id unchanged), or of this head's own (kv_id 0).
  void set_kv(std::shared_ptr<const KvMatrices> shared) { kv_ = std::move(shared); }
  void set_kv(MatrixR k, MatrixR v);
  double bias_at(std::int64_t r, std::int64_t j) const;

 private:
  static const MatrixR& no_matrix();  // k and v before set_kv
  std::shared_ptr<const KvMatrices> kv_;
};

// qk: scale * q k^T + bias over key columns [col_begin, col_end); with a softcap c,
// c * tanh(scale * q k^T / c) + bias. A score that overflows the stage's output format to
// -inf is stored as -inf (a finite masking bias in a narrow format): that key is masked.
Bounded eval_qk(const HeadInputs& in, std::int64_t col_begin, std::int64_t col_end,
                const Arithmetic& a);

// softmax over whole rows: p, row max, row sum of exp(s - max).
struct SoftmaxResult {
  Bounded p, max, sum;
};
SoftmaxResult eval_softmax(const Bounded& scores, const Arithmetic& a);

// One tile of online softmax: given the running state after the previous tile (max = -inf,
// sum = 0 before the first), the new max, the page-relative p~ = exp(s - max_new), the
// rescale factor r = exp(max_prev - max_new) and the new running sum r*sum_prev + sum(p~).
struct OnlineSoftmaxResult {
  Bounded p_tilde, max, sum, rescale;
};
OnlineSoftmaxResult eval_online_softmax(const Bounded& scores_tile, const Bounded& prev_max,
                                        const Bounded& prev_sum, const Arithmetic& a);

// rescale: acc * exp(prev_max - new_max), row by row.
Bounded eval_rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                     const Arithmetic& a);

// pv: p v_rows (+ acc when given, as a GEMM with beta = 1 does).
Bounded eval_pv(const Bounded& p, const MatrixR& v_rows, const Bounded* acc, const Arithmetic& a);

// normalize: acc / sum, row by row (0 where sum is 0).
Bounded eval_normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a);

// out, the end of a chain whose P.V (arithmetic pv) summed v_rows, with each bound capped to
// the range of its column of v_rows (stage_math::range_cap).
Bounded eval_within_value_range(const Bounded& out, const MatrixR& v_rows, const Arithmetic& pv);

// log-sum-exp of a row: max + log(sum) (-inf where sum is 0).
Bounded eval_lse(const Bounded& max, const Bounded& sum, const Arithmetic& a);

// split-KV combine of normalized partial outputs by their log-sum-exp; a split whose every
// key is masked (lse = -inf) has weight 0.
Bounded eval_combine(const std::vector<Bounded>& outs, const std::vector<Bounded>& lses,
                     const Arithmetic& a);

// The log-sum-exp of the combined row, max_t lse_t + log(sum_t exp(lse_t - max_t lse_t))
// (-inf where every split is empty).
Bounded eval_combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a);

}  // namespace fc

#pragma once
// A CPU emulation of each stage as a GPU kernel computes it: inputs in their stored format,
// fp32 accumulation in sequential order (or as a tensor core accumulates: tensor_core_sum.h),
// exp through exp2f(x * log2 e) as GPU fast math does, results rounded to the stage's
// output format. The bound tests hold the error
// bounds of reference/stage_eval.h against it.
#include <optional>
#include <vector>

#include "reference/stage_eval.h"

namespace fc::emu {

// Fault injection in the emulated softmax (docs/faults.md); both true on the clean path.
struct SoftmaxFaults {
  bool subtract_max = true;  // no-max-subtract
  bool guard_masked = true;  // masked-row-nan
};

// tensor_core_operands: the format of q and k when their products run on tensor cores
// (then scaled in fp32, as a GEMM epilogue does); none: an fp32 FMA chain. With a softcap c,
// c tanhf(acc * (scale / c)) + bias; softcap_after_mask is the fault that caps after the
// bias, c tanhf((acc * scale + bias) / c), so a masked key gets -c.
MatrixR qk(const HeadInputs& in, std::int64_t col_begin, std::int64_t col_end, DType out,
           std::optional<DType> tensor_core_operands = std::nullopt, bool softcap_after_mask = false);

struct Softmax {
  MatrixR p, max, sum;
};
Softmax softmax(const MatrixR& scores, DType out, SoftmaxFaults faults = {});

struct OnlineSoftmax {
  MatrixR p_tilde, max, sum, rescale;
};
OnlineSoftmax online_softmax(const MatrixR& scores_tile, const MatrixR& prev_max, const MatrixR& prev_sum, DType out,
                             SoftmaxFaults faults = {});

// acc[row, :] * factor[row], the factor an online softmax step gave (OnlineSoftmax::rescale).
MatrixR rescale(const MatrixR& acc, const MatrixR& factor, DType out);
// p rounded to `operand`; on tensor cores the products are summed from zero and acc added
// once after (a GEMM's beta = 1 epilogue), otherwise an fp32 FMA chain starting from acc.
MatrixR pv(const MatrixR& p, const MatrixR& v_rows, const MatrixR* acc, DType operand, DType out,
           bool tensor_cores = false);
MatrixR normalize(const MatrixR& acc, const MatrixR& sum, DType out);
MatrixR lse(const MatrixR& max, const MatrixR& sum, DType out);
MatrixR combine(const std::vector<MatrixR>& outs, const std::vector<MatrixR>& lses, DType out);

}  // namespace fc::emu

#include "kernels/cpu_emulated/emulate.h"

#include <cmath>
#include <limits>

#include "core/numeric.h"
#include "kernels/cpu_emulated/tensor_core_sum.h"

namespace fc::emu {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float fast_exp(float x) { return std::exp2f(x * 1.44269504088896341f); }
double store(DType t, float x) { return round_to(t, x); }
// The origin exponentials are taken from: the max, or 0 without max subtraction (a fault).
// For a row with no key the guard skips the row; the fault lets exp(-inf - (-inf)) happen.
float origin(float m, SoftmaxFaults f) { return f.subtract_max ? m : 0.0f; }
}  // namespace

MatrixR qk(const HeadInputs& in, std::int64_t col_begin, std::int64_t col_end, DType out,
           std::optional<DType> tensor_core_operands, bool softcap_after_mask) {
  const float scale = static_cast<float>(in.scale);
  const float cap = static_cast<float>(in.softcap), scale_over_cap = static_cast<float>(in.scale / in.softcap);
  MatrixR s(in.q.rows(), col_end - col_begin);
  const MatrixR& k = in.k();
  for (Eigen::Index i = 0; i < in.q.rows(); ++i) {
    for (std::int64_t j = col_begin; j < col_end; ++j) {
      float acc = 0;
      if (tensor_core_operands) {
        TensorCoreSum sum(*tensor_core_operands);
        for (Eigen::Index d = 0; d < in.q.cols(); ++d) sum.add(in.q(i, d), k(j, d));
        acc = sum.result();
      } else {
        for (Eigen::Index d = 0; d < in.q.cols(); ++d) {
          acc = std::fmaf(static_cast<float>(in.q(i, d)), static_cast<float>(k(j, d)), acc);
        }
      }
      const float bias = static_cast<float>(in.bias(i, j));
      float score = acc * scale + bias;
      if (in.softcap > 0) {
        score = softcap_after_mask ? cap * std::tanh((acc * scale + bias) / cap)
                                   : cap * std::tanh(acc * scale_over_cap) + bias;
      }
      s(i, j - col_begin) = store(out, score);
    }
  }
  return s;
}

Softmax softmax(const MatrixR& scores, DType out, SoftmaxFaults faults) {
  Softmax r{MatrixR::Zero(scores.rows(), scores.cols()), MatrixR(scores.rows(), 1), MatrixR(scores.rows(), 1)};
  for (Eigen::Index i = 0; i < scores.rows(); ++i) {
    float top = kNegInf;
    for (Eigen::Index j = 0; j < scores.cols(); ++j) top = std::max(top, static_cast<float>(scores(i, j)));
    r.max(i, 0) = top;
    if (top == kNegInf && faults.guard_masked) {
      r.sum(i, 0) = 0;
      continue;
    }
    const float m = origin(top, faults);
    float l = 0;
    for (Eigen::Index j = 0; j < scores.cols(); ++j) l += fast_exp(static_cast<float>(scores(i, j)) - m);
    r.sum(i, 0) = l;
    for (Eigen::Index j = 0; j < scores.cols(); ++j) {
      r.p(i, j) = store(out, fast_exp(static_cast<float>(scores(i, j)) - m) / l);
    }
  }
  return r;
}

OnlineSoftmax online_softmax(const MatrixR& s, const MatrixR& prev_max, const MatrixR& prev_sum, DType out,
                             SoftmaxFaults faults) {
  OnlineSoftmax r{MatrixR::Zero(s.rows(), s.cols()), MatrixR(s.rows(), 1), MatrixR(s.rows(), 1), MatrixR(s.rows(), 1)};
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const float mp = static_cast<float>(prev_max(i, 0));
    float mn = mp;
    for (Eigen::Index j = 0; j < s.cols(); ++j) mn = std::max(mn, static_cast<float>(s(i, j)));
    r.max(i, 0) = mn;
    if (mn == kNegInf && faults.guard_masked) {
      r.sum(i, 0) = 0;
      r.rescale(i, 0) = 0;
      continue;
    }
    const float rr = !faults.subtract_max ? 1.0f : (mp == kNegInf && faults.guard_masked ? 0.0f : fast_exp(mp - mn));
    float l = rr * static_cast<float>(prev_sum(i, 0));
    for (Eigen::Index j = 0; j < s.cols(); ++j) {
      const float pt = fast_exp(static_cast<float>(s(i, j)) - origin(mn, faults));
      r.p_tilde(i, j) = store(out, pt);
      l += static_cast<float>(r.p_tilde(i, j));  // summed as stored, as the GEMM operand
    }
    r.sum(i, 0) = l;
    r.rescale(i, 0) = rr;
  }
  return r;
}

MatrixR rescale(const MatrixR& acc, const MatrixR& factor, DType out) {
  MatrixR r(acc.rows(), acc.cols());
  for (Eigen::Index i = 0; i < acc.rows(); ++i) {
    const float f = static_cast<float>(factor(i, 0));
    for (Eigen::Index c = 0; c < acc.cols(); ++c) r(i, c) = store(out, f * static_cast<float>(acc(i, c)));
  }
  return r;
}

MatrixR pv(const MatrixR& p, const MatrixR& v_rows, const MatrixR* acc, DType operand, DType out, bool tensor_cores) {
  MatrixR r(p.rows(), v_rows.cols());
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    for (Eigen::Index c = 0; c < v_rows.cols(); ++c) {
      float a = acc ? static_cast<float>((*acc)(i, c)) : 0.0f;
      if (tensor_cores) {
        TensorCoreSum sum(operand);
        for (Eigen::Index j = 0; j < p.cols(); ++j) sum.add(round_to(operand, p(i, j)), v_rows(j, c));
        a += sum.result();
      } else {
        for (Eigen::Index j = 0; j < p.cols(); ++j) {
          const float pj = static_cast<float>(round_to(operand, p(i, j)));
          a = std::fmaf(pj, static_cast<float>(v_rows(j, c)), a);
        }
      }
      r(i, c) = store(out, a);
    }
  }
  return r;
}

MatrixR normalize(const MatrixR& acc, const MatrixR& sum, DType out) {
  MatrixR r = MatrixR::Zero(acc.rows(), acc.cols());
  for (Eigen::Index i = 0; i < acc.rows(); ++i) {
    const float l = static_cast<float>(sum(i, 0));
    if (l == 0) continue;
    const float inv = 1.0f / l;
    for (Eigen::Index c = 0; c < acc.cols(); ++c) r(i, c) = store(out, static_cast<float>(acc(i, c)) * inv);
  }
  return r;
}

MatrixR lse(const MatrixR& max, const MatrixR& sum, DType out) {
  MatrixR r(max.rows(), 1);
  for (Eigen::Index i = 0; i < max.rows(); ++i) {
    const float m = static_cast<float>(max(i, 0)), l = static_cast<float>(sum(i, 0));
    r(i, 0) = (l == 0 || m == kNegInf) ? -INFINITY : store(out, m + std::log(l));
  }
  return r;
}

MatrixR combine(const std::vector<MatrixR>& outs, const std::vector<MatrixR>& lses, DType out) {
  MatrixR r = MatrixR::Zero(outs[0].rows(), outs[0].cols());
  for (Eigen::Index i = 0; i < r.rows(); ++i) {
    float top = kNegInf;
    for (const MatrixR& l : lses) top = std::max(top, static_cast<float>(l(i, 0)));
    if (top == kNegInf) continue;
    float total = 0;
    std::vector<float> w(outs.size(), 0.0f);
    for (std::size_t t = 0; t < outs.size(); ++t) {
      const float l = static_cast<float>(lses[t](i, 0));
      w[t] = l == kNegInf ? 0.0f : fast_exp(l - top);
      total += w[t];
    }
    for (Eigen::Index c = 0; c < r.cols(); ++c) {
      float a = 0;
      for (std::size_t t = 0; t < outs.size(); ++t) a = std::fmaf(w[t], static_cast<float>(outs[t](i, c)), a);
      r(i, c) = store(out, a / total);
    }
  }
  return r;
}

}  // namespace fc::emu

#include "harness/triage/input_findings.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/numeric.h"
#include "reference/attention.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kFp16Max = max_finite(DType::f16);

std::string at(std::int64_t b, std::int64_t h, std::int64_t row, std::int64_t col) {
  std::ostringstream s;
  s << "b=" << b << " h=" << h << " row " << row << " col " << col;
  return s.str();
}

std::string number(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}

void scan_tensor(const char* name, const HostTensor& t, std::vector<InputFinding>& out) {
  std::int64_t nan = 0, inf = 0, subnormal = 0, first_nan = -1, first_inf = -1;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.get(i);
    if (std::isnan(x)) {
      if (nan++ == 0) first_nan = i;
    } else if (std::isinf(x)) {
      if (inf++ == 0) first_inf = i;
    } else if (is_subnormal(t.dtype(), x)) {
      ++subnormal;
    }
  }
  const Dims& d = t.dims();
  auto where = [&](std::int64_t i) {
    return at(i / (d[1] * d[2] * d[3]), (i / (d[2] * d[3])) % d[1], (i / d[3]) % d[2], i % d[3]);
  };
  if (nan) out.push_back({"input-nan", std::string(name) + " holds " + std::to_string(nan) + " NaN, the first at " + where(first_nan), true});
  if (inf) out.push_back({"input-inf", std::string(name) + " holds " + std::to_string(inf) + " Inf, the first at " + where(first_inf), true});
  if (subnormal) {
    out.push_back({"subnormal-inputs", std::string(name) + " holds " + std::to_string(subnormal) + " of " +
                                           std::to_string(t.numel()) + " values in the " + dtype_name(t.dtype()) +
                                           " subnormal range (reduced precision)",
                   false});
  }
}

}  // namespace

AttentionInputs for_kernels(const AttentionInputs& in, DType dtype) {
  if (in.problem.dtype == dtype) return in;
  AttentionInputs out = in;
  out.q = in.q.to(dtype);
  out.k = in.k.to(dtype);
  out.v = in.v.to(dtype);
  out.problem.dtype = dtype;
  return out;
}

std::vector<InputFinding> find_input_problems(const AttentionInputs& in, DType kernel_dtype) {
  std::vector<InputFinding> out;
  scan_tensor("q", in.q, out);
  scan_tensor("k", in.k, out);
  scan_tensor("v", in.v, out);
  if (in.problem.dtype != kernel_dtype) {
    for (const auto& [name, t] : {std::pair<const char*, const HostTensor*>{"q", &in.q}, {"k", &in.k}, {"v", &in.v}}) {
      std::int64_t lost = 0;
      for (std::int64_t i = 0; i < t->numel(); ++i) lost += overflows(kernel_dtype, t->get(i));
      if (lost) {
        out.push_back({"conversion-overflow", std::string(name) + " holds " + std::to_string(lost) + " " +
                                                  dtype_name(in.problem.dtype) + " values past the " +
                                                  dtype_name(kernel_dtype) + " range: they become Inf in " +
                                                  dtype_name(kernel_dtype),
                       true});
      }
    }
  }

  const Shape& s = in.problem.shape;
  std::int64_t masked = 0, unscaled = 0, scaled = 0, exp_risk = 0;
  std::string first_masked, first_unscaled, first_scaled, first_exp;
  double peak_unscaled = 0, peak_row_max = -kInf;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const HeadInputs head = head_inputs(in, b, h);
      const MatrixR qk = head.q * head.k.transpose();
      for (std::int64_t i = 0; i < s.q_len; ++i) {
        double row_max = -kInf;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          const double raw = qk(i, j), score = head.scale * raw + head.bias(i, j);
          if (std::isfinite(raw) && std::fabs(raw) > kFp16Max) {
            if (unscaled++ == 0) first_unscaled = at(b, h, i, j) + " (q.k = " + number(raw) + ")";
            peak_unscaled = std::max(peak_unscaled, std::fabs(raw));
          }
          if (std::isfinite(score) && std::fabs(score) > kFp16Max && scaled++ == 0) {
            first_scaled = at(b, h, i, j) + " (" + number(score) + ")";
          }
          if (head.bias(i, j) != -kInf) row_max = std::max(row_max, score);
        }
        if (row_max == -kInf) {
          if (masked++ == 0) first_masked = "row " + std::to_string(i) + " of b=" + std::to_string(b) + " h=" + std::to_string(h);
        } else if (row_max > kFp32ExpOverflow) {
          if (exp_risk++ == 0) first_exp = "row " + std::to_string(i) + " of b=" + std::to_string(b) + " h=" + std::to_string(h);
          peak_row_max = std::max(peak_row_max, row_max);
        }
      }
    }
  }
  if (masked) {
    out.push_back({"fully-masked-rows", std::to_string(masked) + " query rows have no key to attend to (all " +
                                            std::to_string(s.kv_len) + " masked), the first " + first_masked +
                                            ": their max is -inf, and without a guard exp(-inf - (-inf)) is NaN",
                   false});
  }
  if (unscaled) {
    out.push_back({"score-overflow-unscaled", std::to_string(unscaled) + " scores exceed the fp16 range before the scale (up to " +
                                                  number(peak_unscaled) + "), the first at " + first_unscaled +
                                                  ": a kernel storing q.k in fp16 before scaling gets Inf",
                   false});
  }
  if (scaled) {
    out.push_back({"score-overflow", std::to_string(scaled) + " scores exceed the fp16 range after the scale, the first at " +
                                         first_scaled + ": fp16 scores overflow",
                   false});
  }
  if (exp_risk) {
    out.push_back({"exp-overflow-risk", std::to_string(exp_risk) + " rows have a max score above 88.7 (up to " +
                                            number(peak_row_max) + "), the first " + first_exp +
                                            ": exp overflows fp32 there unless the row max is subtracted first",
                   false});
  }
  return out;
}

}  // namespace fc

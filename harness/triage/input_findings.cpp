#include "harness/triage/input_findings.h"

#include <cmath>
#include <limits>

#include "core/numeric.h"
#include "reference/attention.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kFp16Max = max_finite(DType::f16);

// "1 query row has", "3 query rows have": a count, its noun and verb agreeing.
std::string count_text(std::int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// exp of a bias below this is 0 in fp32, past the subnormals: a bias meant as a mask.
constexpr double kFp32ExpUnderflow = -103.97;

// The score of one key, as the reference defines it (softcap, then the bias).
double qk_score(const HeadInputs& head, double dot, double bias) {
  const double t = head.scale * dot;
  return (head.softcap > 0 ? head.softcap * std::tanh(t / head.softcap) : t) + bias;
}

std::string row_text(const Index4& i) {
  return "row " + std::to_string(i.row) + " of b=" + std::to_string(i.b) + " h=" + std::to_string(i.h);
}

// Counts the elements of `t` for which `hit` holds, and the first of them.
template <class Predicate>
std::int64_t count_where(const HostTensor& t, Predicate hit, std::int64_t& first) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (hit(t.get(i)) && n++ == 0) first = i;
  }
  return n;
}

void scan_tensor(const char* name, const HostTensor& t, std::vector<InputFinding>& out) {
  std::int64_t first = -1;
  if (const std::int64_t n = count_where(t, [](double x) { return std::isnan(x); }, first)) {
    const Index4 i = index_in(t.dims(), first);
    out.push_back({"input-nan", name, i, std::string(name) + " holds " + std::to_string(n) + " NaN, the first at " + at_text(i), true});
  }
  if (const std::int64_t n = count_where(t, [](double x) { return std::isinf(x); }, first)) {
    const Index4 i = index_in(t.dims(), first);
    out.push_back({"input-inf", name, i, std::string(name) + " holds " + std::to_string(n) + " Inf, the first at " + at_text(i), true});
  }
  const DType format = t.dtype();
  if (const std::int64_t n = count_where(t, [format](double x) { return is_subnormal(format, x); }, first)) {
    out.push_back({"subnormal-inputs", name, index_in(t.dims(), first),
                   std::string(name) + " holds " + std::to_string(n) + " of " + std::to_string(t.numel()) +
                       " values in the " + dtype_name(format) + " subnormal range (reduced precision)",
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
      std::int64_t first = -1;
      const std::int64_t lost = count_where(*t, [kernel_dtype](double x) { return overflows(kernel_dtype, x); }, first);
      if (lost) {
        const Index4 i = index_in(t->dims(), first);
        out.push_back({"conversion-overflow", name, i,
                       std::string(name) + " holds " +
                           count_text(lost, std::string(dtype_name(in.problem.dtype)) + " value",
                                      std::string(dtype_name(in.problem.dtype)) + " values") +
                           " past the " + dtype_name(kernel_dtype) + " range, the first at " + at_text(i) +
                           ": they become Inf in " + dtype_name(kernel_dtype),
                       true});
      }
    }
  }

  const Shape& s = in.problem.shape;
  const bool fp16_kernel = kernel_dtype == DType::f16;
  std::int64_t masked = 0, unscaled = 0, scaled = 0, exp_risk = 0, finite_masked = 0, uniform = 0, lse_out = 0;
  Index4 first_masked, first_unscaled, first_scaled, first_exp, first_finite, first_lse;
  double first_raw = 0, first_score = 0, peak_unscaled = 0, peak_row_max = -kInf, finite_bias = 0, first_lse_value = 0;
  double lowest_lse = kInf, highest_lse = -kInf;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      // A block of rows at a time, the mask read where needed: no Sq x Sk matrix of a head is
      // held (at 30k keys two of them took 14 GB).
      const HeadInputs head = head_inputs(in, b, h, BiasForm::mask);
      const std::int64_t rows = in.problem.q_len_of(b);  // rows past a sequence's length do not exist
      constexpr std::int64_t kBlock = 256;
      MatrixR qk;
      std::vector<double> bias(static_cast<std::size_t>(s.kv_len));
      for (std::int64_t i = 0; i < rows; ++i) {
        if (i % kBlock == 0) qk = head.q.middleRows(i, std::min(kBlock, rows - i)) * head.k().transpose();
        const std::int64_t r = i % kBlock;
        for (std::int64_t j = 0; j < s.kv_len; ++j) bias[static_cast<std::size_t>(j)] = head.bias_at(i, j);
        double row_max = -kInf, largest_bias = -kInf;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          const double raw = qk(r, j), score = qk_score(head, raw, bias[static_cast<std::size_t>(j)]);
          // fp16's range matters to a kernel that reads fp16 and may form q.k or the scores in it;
          // a masking bias is left out (a huge negative one rounds to -inf there: a masked key).
          if (fp16_kernel && std::isfinite(raw) && std::fabs(raw) > kFp16Max) {
            if (unscaled++ == 0) first_unscaled = {b, h, i, j}, first_raw = raw;
            peak_unscaled = std::max(peak_unscaled, std::fabs(raw));
          }
          const double unbiased = qk_score(head, raw, 0.0);
          if (fp16_kernel && std::isfinite(unbiased) && std::fabs(unbiased) > kFp16Max && scaled++ == 0) {
            first_scaled = {b, h, i, j}, first_score = unbiased;
          }
          if (bias[static_cast<std::size_t>(j)] != -kInf) {
            row_max = std::max(row_max, score);
            largest_bias = std::max(largest_bias, bias[static_cast<std::size_t>(j)]);
          }
        }
        if (row_max == -kInf) {
          if (masked++ == 0) first_masked = {b, h, i, -1};
          continue;
        }
        if (row_max > kFp32ExpOverflow) {
          if (exp_risk++ == 0) first_exp = {b, h, i, -1};
          peak_row_max = std::max(peak_row_max, row_max);
        }
        // Every key carries a bias whose exp alone underflows fp32: masked, as the mask's
        // author meant, by a finite bias, which masks nothing once it is every key's.
        if (largest_bias < kFp32ExpUnderflow) {
          if (finite_masked++ == 0) first_finite = {b, h, i, -1}, finite_bias = largest_bias;
          float first_fp32 = 0;
          bool same = true;
          for (std::int64_t j = 0, n = 0; j < s.kv_len; ++j) {
            if (bias[static_cast<std::size_t>(j)] == -kInf) continue;
            const float stored = static_cast<float>(qk_score(head, qk(r, j), bias[static_cast<std::size_t>(j)]));
            same = same && (n++ == 0 || stored == first_fp32);
            if (n == 1) first_fp32 = stored;
          }
          uniform += same ? 1 : 0;
        }
        double sum = 0;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          if (bias[static_cast<std::size_t>(j)] != -kInf) sum += std::exp(qk_score(head, qk(r, j), bias[static_cast<std::size_t>(j)]) - row_max);
        }
        const double lse = row_max + std::log(sum);
        if (std::fabs(lse) > kFp32ExpOverflow) {
          if (lse_out++ == 0) first_lse = {b, h, i, -1}, first_lse_value = lse;
          lowest_lse = std::min(lowest_lse, lse);
          highest_lse = std::max(highest_lse, lse);
        }
      }
    }
  }
  if (finite_masked) {
    const std::string output = uniform == finite_masked ? "the uniform average of V"
                               : uniform == 0 ? "the softmax of its own scores"
                                              : "the softmax of its own scores (in fp32 the uniform average of V for " +
                                                    std::to_string(uniform) + " of them)";
    out.push_back({"finite-bias-masked-rows", "mask", first_finite,
                   std::to_string(finite_masked) + " query rows are masked by a finite bias (every key carries one, up to " +
                       number_text(finite_bias) + "), the first " + row_text(first_finite) + ": its output is " + output +
                       ", not 0",
                   false});
  }
  if (lse_out) {
    out.push_back({"lse-out-of-range", "scores", first_lse,
                   std::to_string(lse_out) + " rows have a log-sum-exp beyond +-88.7 (from " + number_text(lowest_lse) +
                       " to " + number_text(highest_lse) + "), the first " + row_text(first_lse) + " (" +
                       number_text(first_lse_value) + "): exp(lse) or exp(-lse) overflows fp32 there, where a backward "
                       "pass recomputes p = exp(s - lse)",
                   false});
  }
  if (masked) {
    out.push_back({"fully-masked-rows", "mask", first_masked,
                   count_text(masked, "query row has", "query rows have") + " no key to attend to (all " +
                       std::to_string(in.problem.kv_len_of(first_masked.b)) +
                       " masked), the first " + row_text(first_masked) +
                       ": their max is -inf, and without a guard exp(-inf - (-inf)) is NaN",
                   false});
  }
  if (unscaled) {
    out.push_back({"score-overflow-unscaled", "scores", first_unscaled,
                   count_text(unscaled, "score exceeds", "scores exceed") + " the fp16 range before the scale (up to " +
                       number_text(peak_unscaled) + "), the first at " + at_text(first_unscaled) + " (q.k = " + number_text(first_raw) +
                       "): a kernel storing q.k in fp16 before scaling gets Inf",
                   false});
  }
  if (scaled) {
    out.push_back({"score-overflow", "scores", first_scaled,
                   count_text(scaled, "score exceeds", "scores exceed") + " the fp16 range after the scale, the first at " +
                       at_text(first_scaled) + " (" + number_text(first_score) + "): fp16 scores overflow",
                   false});
  }
  if (exp_risk) {
    out.push_back({"exp-overflow-risk", "scores", first_exp,
                   count_text(exp_risk, "row has", "rows have") + " a max score above 88.7 (up to " + number_text(peak_row_max) +
                       "), the first " + row_text(first_exp) +
                       ": exp overflows fp32 there unless the row max is subtracted first",
                   false});
  }
  return out;
}

}  // namespace fc

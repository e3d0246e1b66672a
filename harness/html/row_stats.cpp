#include "harness/html/row_stats.h"

#include <cmath>
#include <limits>
#include <map>

#include "reference/attention.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The quantity of output i for head (b, h), one value per row.
std::vector<double> row_values(const TraceRun& run, const OutputResult& r, std::size_t i, std::int64_t b, std::int64_t h) {
  const MatrixR m = head_matrix(run.captured[i].tensor, b, h) * r.value_scale;
  return std::vector<double>(m.data(), m.data() + m.size());
}

// Max of a row; NaN if any value is NaN (std::max would depend on the order).
double nan_max(const double* x, std::int64_t n) {
  double m = -kInf;
  for (std::int64_t j = 0; j < n; ++j) {
    if (std::isnan(x[j])) return x[j];
    m = std::max(m, x[j]);
  }
  return m;
}

// log(sum_s exp(x_s)) over splits, stably.
double log_sum_exp(const std::vector<double>& x) {
  const double m = nan_max(x.data(), static_cast<std::int64_t>(x.size()));
  if (std::isnan(m) || m == -kInf) return m;
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  return m + std::log(s);
}

bool usable(const TraceRun& run, const OutputResult& r, std::size_t i) {
  return r.present && r.capture_problem.empty() && !run.captured[i].tensor.empty();
}

}  // namespace

RowStats reference_row_stats(const HeadInputs& in) {
  RowStats s;
  const auto rows = static_cast<std::size_t>(in.q.rows());
  s.max.resize(rows);
  s.sum.resize(rows);
  s.lse.resize(rows);
  // In blocks of rows (a whole head's scores are S x S doubles), each one GEMM.
  for (const std::vector<std::int64_t>& block : row_blocks_of(in.q.rows(), in.k().rows())) {
    const Eigen::Index first = block.front(), count = static_cast<Eigen::Index>(block.size());
    MatrixR scores = in.scale * (in.q.middleRows(first, count) * in.k().transpose());
    for (Eigen::Index i = 0; i < count; ++i) {
      for (Eigen::Index j = 0; j < scores.cols(); ++j) {
        if (in.softcap > 0) scores(i, j) = in.softcap * std::tanh(scores(i, j) / in.softcap);
        scores(i, j) += in.bias_at(first + i, j);
      }
      const double m = nan_max(scores.row(i).data(), scores.cols());
      double l = 0;
      if (std::isnan(m)) {
        l = m;
      } else if (m != -kInf) {
        for (Eigen::Index j = 0; j < scores.cols(); ++j) l += std::exp(scores(i, j) - m);
      }
      const auto r = static_cast<std::size_t>(first + i);
      s.max[r] = m;
      s.sum[r] = l;
      s.lse[r] = l > 0 ? m + std::log(l) : (std::isnan(l) ? l : -kInf);
    }
  }
  return s;
}

KernelRowSource kernel_row_source(const TraceRun& run, const std::vector<OutputResult>& outputs) {
  // Per split, the trace build's output of the highest tile (outputs come in execution order;
  // the production build's results follow them, and their lse would stand in for the trace
  // build's, indexed into the production run's captures).
  std::map<int, std::size_t> max, sum, lse;
  std::map<int, int> max_tile, sum_tile;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const OutputResult& r = outputs[i];
    if (r.production) continue;
    if (r.quantity == Quantity::row_max && (!max.count(r.split) || r.tile >= max_tile[r.split])) {
      max[r.split] = i;
      max_tile[r.split] = r.tile;
    }
    if (r.quantity == Quantity::row_sum && (!sum.count(r.split) || r.tile >= sum_tile[r.split])) {
      sum[r.split] = i;
      sum_tile[r.split] = r.tile;
    }
    if (r.quantity == Quantity::partial_lse) lse[r.split] = i;
  }
  KernelRowSource source;
  std::string missing;
  for (const auto& [split, i] : max) {
    const auto s = sum.find(split);
    if (s == sum.end() || !usable(run, outputs[i], i) || !usable(run, outputs[s->second], s->second)) {
      missing = outputs[i].name;
      break;
    }
    source.max.push_back(i);
    source.sum.push_back(s->second);
  }
  if (!missing.empty() || max.empty()) {
    source.max.clear();
    source.sum.clear();
    source.description = max.empty() ? "the kernel declares no row max and sum, so only the reference is drawn"
                                     : "the kernel's row max and sum are not available (" + missing +
                                           " has no tensor in this run), so only the reference is drawn";
    return source;
  }
  bool every_lse = lse.size() == max.size();
  for (const auto& [split, i] : lse) every_lse = every_lse && max.count(split) && usable(run, outputs[i], i);
  if (every_lse) {
    for (const auto& entry : lse) source.lse.push_back(entry.second);
  }
  std::string names;
  for (std::size_t n = 0; n < source.max.size(); ++n) {
    names += (n ? ", " : "") + outputs[source.max[n]].name + " and " + outputs[source.sum[n]].name;
  }
  source.description = "the kernel's " + names + (source.max.size() > 1 ? " (its splits combined in FP64)" : "") +
                       (every_lse ? "; its lse from the splits' captured lse" : "; its lse as max + log(sum)");
  return source;
}

RowStats kernel_row_stats(const KernelRowSource& source, const TraceRun& run, const std::vector<OutputResult>& outputs,
                          std::int64_t b, std::int64_t h) {
  RowStats s;
  if (!source.has_max_sum()) return s;
  std::vector<std::vector<double>> maxima, sums, lses;
  for (std::size_t n = 0; n < source.max.size(); ++n) {
    maxima.push_back(row_values(run, outputs[source.max[n]], source.max[n], b, h));
    sums.push_back(row_values(run, outputs[source.sum[n]], source.sum[n], b, h));
  }
  for (std::size_t i : source.lse) lses.push_back(row_values(run, outputs[i], i, b, h));
  const std::size_t rows = maxima.front().size();
  std::vector<double> per_split(maxima.size());
  for (std::size_t row = 0; row < rows; ++row) {
    for (std::size_t t = 0; t < maxima.size(); ++t) per_split[t] = maxima[t][row];
    const double m = nan_max(per_split.data(), static_cast<std::int64_t>(per_split.size()));
    double l = 0;
    for (std::size_t t = 0; t < maxima.size(); ++t) {
      if (maxima[t][row] == -kInf && !std::isnan(m)) continue;  // a split with no key adds nothing
      l += sums[t][row] * std::exp(maxima[t][row] - m);
    }
    s.max.push_back(m);
    s.sum.push_back(l);
    if (lses.empty()) {
      s.lse.push_back(std::isnan(l) || std::isnan(m) ? NAN : l > 0 ? m + std::log(l) : -kInf);
    } else {
      for (std::size_t t = 0; t < lses.size(); ++t) per_split[t] = lses[t][row];
      s.lse.push_back(log_sum_exp(per_split));
    }
  }
  return s;
}

}  // namespace fc

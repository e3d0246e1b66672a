// precision-loss: the error is the error of a lower-precision arithmetic than the stage
// declares. The stage is re-emulated on the same inputs (the head's q and k, the captured
// weights and V) in each narrower arithmetic: the accumulation of Q·Kᵀ or P·V in fp16 or bf16
// (sequential, one rounding per addition), the probabilities rounded to fp16 or bf16 before
// P·V, or the result stored in fp16 or bf16. The summation order of the kernel is unknown, so
// the test is on the size of the error, not its value: a row matches an emulation when the
// RMS of the kernel's error over the row is within a factor kRmsRatio of the emulation's, and
// a bad element of a matching row is explained when its error is at most kSigmas of the
// emulation's RMS. Rows are sampled (kRows, spread over the bad rows): the emulation is
// O(Sk·D) a row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "core/numeric.h"
#include "harness/trace/hypotheses/diagnosis.h"

namespace fc {
namespace {

constexpr double kRmsRatio = 3.0;
constexpr double kSigmas = 8.0;
constexpr std::size_t kRows = 48;

enum class Change { accumulate, operand, stored };

struct Emulation {
  Change change;
  DType format;
  std::string describe() const {
    const std::string f = dtype_name(format);
    switch (change) {
      case Change::accumulate: return "accumulated in " + f;
      case Change::operand: return "with the probabilities rounded to " + f + " before P·V";
      case Change::stored: return "stored in " + f;
    }
    return "";
  }
};

// The dot product x·y with every partial sum rounded to `format` (or exact, FP64).
double dot(const Eigen::Ref<const Eigen::RowVectorXd>& x, const Eigen::Ref<const Eigen::RowVectorXd>& y,
           std::optional<DType> format) {
  double acc = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    acc += x(i) * y(i);
    if (format) acc = round_to(*format, acc);
  }
  return acc;
}

class RowEmulator {
 public:
  explicit RowEmulator(const Diagnosis& d) : d_(d), weights_(d.result.kind == StageKind::pv ? stage_weights(d) : std::nullopt) {}

  bool supports(const Emulation& e) const {
    if (e.change == Change::stored) return true;
    if (d_.result.kind == StageKind::qk) return e.change == Change::accumulate && d_.head.softcap == 0;
    return d_.result.kind == StageKind::pv && weights_ && weights_->w.rows() == d_.kernel.rows();
  }

  // The error the emulation makes on row r, element by element: emulated - exact, both on the
  // same inputs (for `stored`, the reference rounded, minus the reference).
  std::vector<double> error(const Emulation& e, Eigen::Index r) const {
    // NaN where the emulation has nothing to say (a masked key, a non-finite reference).
    std::vector<double> out(static_cast<std::size_t>(d_.kernel.cols()), std::numeric_limits<double>::quiet_NaN());
    for (Eigen::Index c = 0; c < d_.kernel.cols(); ++c) {
      const double ref = d_.reference(r, c);
      if (!std::isfinite(ref)) continue;
      if (e.change == Change::stored) {
        out[static_cast<std::size_t>(c)] = round_to(e.format, ref) - ref;
      } else if (d_.result.kind == StageKind::qk) {
        const std::int64_t key = d_.col_offset + c;
        if (key >= d_.head.k().rows() || !std::isfinite(d_.head.bias_at(r, key))) continue;
        const auto q = d_.head.q.row(r);
        const auto k = d_.head.k().row(key);
        out[static_cast<std::size_t>(c)] = d_.head.scale * (dot(q, k, e.format) - dot(q, k, std::nullopt));
      } else {
        out[static_cast<std::size_t>(c)] = pv_error(e, r, c);
      }
    }
    return out;
  }

 private:
  double pv_error(const Emulation& e, Eigen::Index r, Eigen::Index c) const {
    const MatrixR& w = weights_->w;
    const std::int64_t keys = std::min<std::int64_t>(w.cols(), d_.head.v().rows() - weights_->first_key);
    double exact = 0, emulated = 0;
    for (std::int64_t j = 0; j < keys; ++j) {
      const double p = w(r, j), v = d_.head.v()(weights_->first_key + j, c);
      if (!std::isfinite(p)) return std::numeric_limits<double>::quiet_NaN();
      exact += p * v;
      if (e.change == Change::operand) {
        emulated += round_to(e.format, p) * v;
      } else {
        emulated = round_to(e.format, emulated + p * v);
      }
    }
    return emulated - exact;
  }

  const Diagnosis& d_;
  std::optional<StageWeights> weights_;
};

double rms(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return x.empty() ? 0 : std::sqrt(s / static_cast<double>(x.size()));
}

// The emulation's errors and the kernel's over the same columns: those where both are defined.
std::pair<std::vector<double>, std::vector<double>> paired_errors(const Diagnosis& d, const std::vector<double>& emulated,
                                                                  Eigen::Index r) {
  std::pair<std::vector<double>, std::vector<double>> out;
  for (Eigen::Index c = 0; c < d.kernel.cols(); ++c) {
    const double e = emulated[static_cast<std::size_t>(c)], k = d.kernel(r, c), x = d.reference(r, c);
    if (!std::isfinite(e) || !std::isfinite(k) || !std::isfinite(x)) continue;
    out.first.push_back(e);
    out.second.push_back(k - x);
  }
  return out;
}

}  // namespace

Explanation test_lower_precision(const Diagnosis& d) {
  if (d.kernel.size() == 0 || d.reference.rows() != d.kernel.rows()) return {};
  const std::vector<const BadElement*> probes = d.probes(kRows);
  std::map<Eigen::Index, std::vector<const BadElement*>> rows;  // the sampled rows' bad elements
  for (const BadElement* p : probes) rows[p->r];
  std::size_t tested = 0;
  for (const BadElement& e : d.bad) {
    auto it = rows.find(e.r);
    if (it != rows.end() && std::isfinite(e.kernel)) {
      it->second.push_back(&e);
      ++tested;
    }
  }
  if (tested == 0) return {};
  const RowEmulator emulator(d);
  const double declared = unit_roundoff(d.result.dtype);
  Explanation best;
  for (DType format : {DType::f16, DType::bf16}) {
    for (Change change : {Change::accumulate, Change::operand, Change::stored}) {
      const Emulation e{change, format};
      if (!emulator.supports(e) || (change == Change::stored && unit_roundoff(format) <= declared)) continue;
      std::size_t n = 0;
      for (const auto& [r, bad] : rows) {
        const auto [emulated_error, kernel_error] = paired_errors(d, emulator.error(e, r), r);
        const double emulated = rms(emulated_error), observed = rms(kernel_error);
        if (!(emulated > 0) || observed > kRmsRatio * emulated || observed * kRmsRatio < emulated) continue;
        for (const BadElement* b : bad) {
          if (std::fabs(b->kernel - b->reference) <= kSigmas * emulated) ++n;
        }
      }
      const double fraction = static_cast<double>(n) / static_cast<double>(tested);
      if (n == 0 || fraction <= best.explained) continue;
      best = {"precision-loss", fraction,
              d.result.name + " of b=" + std::to_string(d.b) + " h=" + std::to_string(d.h) + " has the error of the stage " +
                  e.describe() + " (re-emulated on the same inputs: the RMS error of each row within " +
                  number_text(kRmsRatio) + "x of the emulation's): " + std::to_string(n) + " of " + std::to_string(tested) +
                  " bad elements of " + std::to_string(rows.size()) + " sampled rows"};
    }
  }
  return best;
}

}  // namespace fc

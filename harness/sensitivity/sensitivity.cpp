#include "harness/sensitivity/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "core/parallel.h"
#include "core/resource_usage.h"
#include "core/rng.h"
#include "harness/inputs.h"
#include "harness/trace/evaluate.h"
#include "harness/trace/judge.h"
#include "kernels/common/device_inputs.h"

namespace fc {
namespace {

// One seeded case, run and judged clean once; every perturbation is planted into its
// captures.
struct CleanRun {
  DType dtype = DType::f16;
  std::int64_t kv_len = 0;
  std::uint64_t seed = 0;
  AttentionInputs inputs;
  TraceRun run;
};

// One head's inputs, its clean end-to-end reference, and the kernel's captured values.
struct HeadState {
  std::int64_t b = 0, h = 0;
  HeadInputs in;
  QuantityMap clean, kernel;
};

// Where a perturbation was planted: the head, the quantity, and what it replaced.
struct Planted {
  std::size_t head;
  QuantityKey key;
  MatrixR original;
};

struct Trial {
  bool applies = false, detected = false, index_right = false;
  std::optional<Index4> index;
  std::string stage;
};

CaseSpec sensitivity_case(const SensitivityOptions& o, DType dtype, std::int64_t kv_len, std::uint64_t seed) {
  CaseSpec s;
  s.shape = {1, 1, o.q_len, kv_len, o.head_dim};
  s.dtype = dtype;
  s.mask = "causal-br";  // so that there is a causal diagonal to shift
  s.dist = "normal";
  s.seed = seed;
  return s;
}

// Stage kinds in the order they first appear.
std::vector<StageKind> kinds_of(const StageGraph& g) {
  std::vector<StageKind> kinds;
  for (const Stage& s : g.stages) {
    if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) kinds.push_back(s.kind);
  }
  return kinds;
}

std::int64_t col_offset(const Shape& shape, const StageGraph& g, const Stage& st, const StageOutput& out) {
  const bool key_indexed = out.quantity == Quantity::scores || out.quantity == Quantity::p_tilde;
  return key_indexed ? stage_columns(shape, g.algorithm, st).begin : 0;
}

bool same_key(const QuantityKey& a, const QuantityKey& b) { return !(a < b) && !(b < a); }

// Plants the perturbation into stage `s` of every head; empty when it changes nothing there.
std::vector<Planted> plant(const Perturbation& p, const StageGraph& g, const Shape& shape, const Stage& st,
                           std::vector<HeadState>& heads, const std::vector<QuantityMap>& bugged) {
  std::vector<Planted> planted_at;
  for (std::size_t hh = 0; hh < heads.size(); ++hh) {
    HeadState& head = heads[hh];
    for (std::size_t o = 0; o < st.outputs.size(); ++o) {
      if (p.kind == PerturbationKind::element_scale && o != 0) continue;
      const QuantityKey key = key_of(st, st.outputs[o]);
      auto it = head.kernel.find(key);
      if (it == head.kernel.end()) continue;
      const std::optional<MatrixR> v = planted(p, key, g, shape, head.b, head.h, it->second.value, head.clean,
                                               bugged.empty() ? nullptr : &bugged[hh]);
      if (!v || !(v->array() != it->second.value.array()).any()) continue;
      planted_at.push_back({hh, key, it->second.value});
      it->second.value = *v;
    }
  }
  return planted_at;
}

void restore(std::vector<HeadState>& heads, const std::vector<Planted>& planted_at) {
  for (const Planted& p : planted_at) heads[p.head].kernel.at(p.key).value = p.original;
}

// Judges one stage as a trace does: its outputs in order, each over the heads in (b, h)
// order, the stage-local comparison before the end-to-end one.
Trial judge_stage(const StageGraph& g, const Problem& problem, const Stage& st, std::vector<HeadState>& heads,
                  const std::vector<Planted>& planted_at, BoundChoice judged_by) {
  const Shape& shape = problem.shape;
  Trial t;
  t.applies = true;
  t.stage = st.output_name(0);
  // Each head's evaluator and stage-local reference, for every output of the stage.
  std::vector<std::unique_ptr<HeadEvaluator>> evaluators;
  std::vector<LocalReference> locals;
  evaluators.reserve(heads.size());
  locals.reserve(heads.size());
  for (const HeadState& head : heads) {
    evaluators.push_back(host_evaluator(head.in));
    locals.emplace_back(*evaluators.back(), shape, g, head.clean, head.kernel, problem.kv_len_of(head.b));
  }
  for (std::size_t o = 0; o < st.outputs.size(); ++o) {
    const StageOutput& out = st.outputs[o];
    const QuantityKey key = key_of(st, out);
    const std::int64_t offset = col_offset(shape, g, st, out);
    std::optional<Metrics> local, e2e;
    for (std::size_t n = 0; n < heads.size(); ++n) {
      const HeadState& head = heads[n];
      if (head.kernel.count(key) == 0) continue;
      const HeadSpot spot{head.b, head.h, offset, is_row_quantity(out.quantity)};
      const OutputComparison c = compare_output(*evaluators[n], problem, g, head.clean, head.kernel, locals[n], st,
                                                out, spot, judged_by);
      if (!local) {
        local = c.local;
        e2e = c.end_to_end;
      } else {
        merge_metrics(*local, c.local);
        merge_metrics(*e2e, c.end_to_end);
      }
    }
    if (!local || (local->passed() && e2e->passed())) continue;
    t.detected = true;
    t.stage = st.output_name(o);
    t.index = (!local->passed() ? local->first_over() : e2e->first_over())->index;
    // Right when the element found is one the perturbation changed.
    for (const Planted& p : planted_at) {
      const HeadState& head = heads[p.head];
      if (!same_key(p.key, key) || head.b != t.index->b || head.h != t.index->h) continue;
      const Eigen::Index r = t.index->row, c = t.index->col < 0 ? 0 : t.index->col - offset;
      t.index_right = p.original(r, c) != head.kernel.at(key).value(r, c);
    }
    return t;
  }
  return t;
}

// A random element of at least median magnitude of the stage's main output: the element
// the element-scale perturbation moves.
std::optional<Index4> typical_element(const std::vector<HeadState>& heads, const QuantityKey& key, Rng& rng) {
  std::vector<std::pair<double, Index4>> finite;
  for (const HeadState& head : heads) {
    auto it = head.kernel.find(key);
    if (it == head.kernel.end()) continue;
    const MatrixR& m = it->second.value;
    for (Eigen::Index r = 0; r < m.rows(); ++r)
      for (Eigen::Index c = 0; c < m.cols(); ++c) {
        if (std::isfinite(m(r, c))) finite.push_back({std::fabs(m(r, c)), Index4{head.b, head.h, r, c}});
      }
  }
  if (finite.empty()) return std::nullopt;
  std::vector<double> sizes;
  for (const auto& f : finite) sizes.push_back(f.first);
  std::nth_element(sizes.begin(), sizes.begin() + static_cast<long>(sizes.size() / 2), sizes.end());
  const double median = sizes[sizes.size() / 2];
  std::vector<Index4> typical;
  for (const auto& f : finite) {
    if (f.first >= median && f.first > 0) typical.push_back(f.second);
  }
  if (typical.empty()) return std::nullopt;
  return typical[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(typical.size())))];
}

// The perturbations of one trial, their parameters drawn from the trial's seed.
std::vector<Perturbation> trial_perturbations(const Shape& s, const std::vector<double>& deltas, Rng& rng) {
  std::vector<Perturbation> list;
  // A key every row attends under the bottom-right causal mask.
  const std::int64_t attended_by_all = std::max<std::int64_t>(1, s.kv_len - s.q_len + 1);
  const std::int64_t key = rng.below(attended_by_all);
  for (PerturbationKind kind : perturbation_kinds()) {
    Perturbation p;
    p.kind = kind;
    p.key = key;
    if (kind == PerturbationKind::neighbour_sum) p.element = {0, 0, rng.below(std::max<std::int64_t>(1, s.q_len - 1)), -1};
    if (kind != PerturbationKind::element_scale) {
      list.push_back(p);
      continue;
    }
    for (double d : deltas) {
      p.delta = d;
      list.push_back(p);
    }
  }
  return list;
}

using CellKey = std::tuple<std::string, double, int>;  // perturbation, delta, stage kind

// What measuring one clean run holds on the host at once: its captures; every stage quantity
// three times in FP64 (the clean reference and a perturbed one, each a value and two bounds,
// and the kernel's values), with as much again for the evaluation's intermediates; and per key,
// K and V as given and three times in FP64 (the head's, the judge's, a perturbed copy) with
// the rows' bias and its perturbed copy. (Measured on cpu-emulated at 1M keys, the per-key
// part was 2.8 KB, which the first estimate left out.)
double measuring_bytes(const Implementation& impl, const Problem& p) {
  const StageGraph g = impl.stage_graph(p);
  const Shape& s = p.shape;
  const double kv = 2.0 * static_cast<double>(s.kv_len) * static_cast<double>(s.head_dim) *
                    static_cast<double>(s.batch * s.kv_head_count()) * (static_cast<double>(dtype_size(p.dtype)) + 3.0 * 8.0);
  const double bias = 2.0 * 8.0 * static_cast<double>(s.batch * s.heads * s.q_len) * static_cast<double>(s.kv_len);
  return graph_output_bytes(s, g) + 2.0 * 7.0 * 8.0 * graph_output_elements(s, g) + kv + bias;
}

// Clean runs measured in parallel: as many as 80% of the machine holds (at least one), as
// host_memory_shortfall counts.
int runs_at_once(double run_bytes) {
  const double room = 0.8 * static_cast<double>(physical_host_bytes());
  if (room <= 0 || run_bytes <= 0) return 0;  // 0: every thread
  return static_cast<int>(std::max(1.0, std::floor(room / run_bytes)));
}

// Every perturbation planted into the first stage of each kind it changes, on one clean run.
void measure_run(const CleanRun& clean, const SensitivityOptions& options, std::map<CellKey, SensitivityCell>& cells) {
  const Shape& shape = clean.inputs.problem.shape;
  const StageGraph& g = clean.run.graph;
  std::vector<HeadState> heads;
  for (std::int64_t b = 0; b < shape.batch; ++b)
    for (std::int64_t h = 0; h < shape.heads; ++h) {
      HeadState head;
      head.b = b;
      head.h = h;
      head.in = head_inputs(clean.inputs, b, h);
      head.clean = end_to_end_reference(head.in, shape, g);
      head.kernel = captured_quantities(clean.inputs.problem, clean.run, b, h, head.clean);
      heads.push_back(std::move(head));
    }
  Rng rng(clean.seed, 4242);
  for (const Perturbation& p : trial_perturbations(shape, options.deltas, rng)) {
    std::vector<QuantityMap> bugged;
    for (const HeadState& head : heads) {
      if (const std::optional<HeadInputs> in = bugged_inputs(p, head.in)) bugged.push_back(end_to_end_reference(*in, shape, g));
    }
    const std::vector<StageKind> kinds = kinds_of(g);
    for (std::size_t order = 0; order < kinds.size(); ++order) {
      const StageKind kind = kinds[order];
      Trial trial;
      for (const Stage& st : g.stages) {
        if (st.kind != kind) continue;
        Perturbation here = p;
        if (p.kind == PerturbationKind::element_scale) {
          Rng pick(clean.seed, static_cast<std::uint64_t>(kind) + 77);
          const std::optional<Index4> e = typical_element(heads, key_of(st, st.outputs[0]), pick);
          if (!e) continue;
          here.element = *e;
        }
        const std::vector<Planted> planted_at = plant(here, g, shape, st, heads, bugged);
        if (planted_at.empty()) continue;
        trial = judge_stage(g, clean.inputs.problem, st, heads, planted_at, options.judged_by);
        restore(heads, planted_at);
        break;
      }
      if (!trial.applies) continue;
      SensitivityCell& cell = cells[{p.id(), p.delta, static_cast<int>(kind)}];
      cell.perturbation = p.id();
      cell.delta = p.delta;
      cell.stage_kind = stage_kind_name(kind);
      cell.stage_order = static_cast<int>(order);
      cell.stage = trial.stage;
      ++cell.trials;
      cell.detected += trial.detected ? 1 : 0;
      cell.index_right += trial.index_right ? 1 : 0;
      if (trial.detected && !cell.first_index) cell.first_index = trial.index;
    }
  }
}

}  // namespace

std::vector<double> default_deltas() {
  std::vector<double> d;
  for (int e = 1; e <= 16; ++e) d.push_back(std::ldexp(1.0, -e));
  return d;
}

SensitivityResult measure_sensitivity(Implementation& impl, const SensitivityOptions& options_in,
                                      const std::function<void(int, int)>& progress) {
  SensitivityOptions options = options_in;
  if (options.deltas.empty()) options.deltas = default_deltas();
  SensitivityResult result;
  const int total = static_cast<int>(options.dtypes.size() * options.kv_lens.size()) * options.seeds;
  int done = 0;
  for (DType dtype : options.dtypes) {
    for (std::int64_t kv_len : options.kv_lens) {
      // The clean runs of one key length, on the implementation's device, one after another;
      // then their references and perturbations on the CPU, in parallel.
      std::vector<std::unique_ptr<CleanRun>> runs;
      double run_bytes = 0;  // what measuring one of them holds
      for (int s = 1; s <= options.seeds; ++s) {
        const CaseSpec spec = sensitivity_case(options, dtype, kv_len, static_cast<std::uint64_t>(s));
        auto clean = std::make_unique<CleanRun>();
        clean->dtype = dtype;
        clean->kv_len = kv_len;
        clean->seed = spec.seed;
        clean->inputs = generate_inputs(spec);
        std::optional<std::string> why = impl.unsupported(clean->inputs.problem);
        if (!why && s == 1) {  // a key length's runs are all the same size: one estimate
          run_bytes = measuring_bytes(impl, clean->inputs.problem);
          why = host_memory_shortfall(run_bytes, "measuring one run would");
        }
        if (why) {
          result.skipped.push_back(impl.name() + " " + spec.label() + ": " + *why);
          done += options.seeds;
          if (progress) progress(done, total);
          break;
        }
        std::unique_ptr<DeviceInputs> device;
        if (impl.on_gpu()) device = std::make_unique<DeviceInputs>(clean->inputs, nullptr);
        const CaseDescription d = describe_case(clean->inputs, spec.label(), spec.mask, spec.dist, spec.seed);
        JudgeOptions judge;
        judge.judged_by = options.judged_by;
        judge.whole_trace = true;  // the clean run's captures are perturbed below
        Judged j = judge_case_keeping(impl, clean->inputs, d, device.get(), false, judge);
        ++result.clean_runs;
        if (progress) progress(++done, total);
        if (j.result.verdict != Verdict::pass) {
          result.false_alarms.push_back(std::move(j.result));
          continue;  // no detection is measured against a baseline that does not pass
        }
        clean->run = std::move(j.run);
        bring_to_host(clean->run.captured);  // kept while the next runs use the device
        runs.push_back(std::move(clean));
      }
      std::vector<std::map<CellKey, SensitivityCell>> per_run(runs.size());
      const int at_once = runs_at_once(run_bytes);
      parallel_for(static_cast<std::int64_t>(runs.size()), [&](std::int64_t i) {
        measure_run(*runs[static_cast<std::size_t>(i)], options, per_run[static_cast<std::size_t>(i)]);
      }, at_once);
      std::map<CellKey, SensitivityCell> merged;
      for (const auto& cells : per_run) {
        for (const auto& [key, c] : cells) {
          SensitivityCell& m = merged[key];
          if (m.trials == 0) {
            m = c;
          } else {
            m.trials += c.trials;
            m.detected += c.detected;
            m.index_right += c.index_right;
            if (!m.first_index) m.first_index = c.first_index;
          }
        }
      }
      for (auto& [key, c] : merged) {
        c.impl = impl.name();
        c.dtype = dtype;
        c.kv_len = kv_len;
        result.cells.push_back(std::move(c));
      }
    }
  }
  return result;
}

}  // namespace fc

#include "harness/trace/evaluate.h"

#include <map>
#include <string>
#include <tuple>

#include "core/parallel.h"
#include "harness/trace/stage_reference.h"

namespace fc {
namespace {

OutputResult describe(const Shape& shape, const StageGraph& graph, const Captured& c) {
  const Stage& stage = graph.stages[c.stage];
  const StageOutput& out = stage.outputs[c.output];
  OutputResult r;
  r.name = stage.output_name(c.output);
  r.stage_name = stage.name();
  r.kind = stage.kind;
  r.split = stage.split;
  r.tile = stage.tile;
  r.quantity = out.quantity;
  r.dtype = out.dtype;
  r.value_scale = out.value_scale;
  r.dims = output_dims(shape, graph.algorithm, stage, out);
  const bool key_indexed = out.quantity == Quantity::scores || out.quantity == Quantity::p_tilde;
  r.col_offset = key_indexed ? stage_columns(shape, graph.algorithm, stage).begin : 0;
  r.present = c.present;
  r.capture_problem = c.problem;
  r.flags = c.flags;
  return r;
}

bool comparable(const Captured& c) { return c.present && c.problem.empty() && c.copied(); }

// The copy of a capture, on the host or kept on the device.
CapturedTensor copy_of(const Captured& c) {
  if (!c.tensor.empty()) return CapturedTensor::on_host(c.tensor);
  return {nullptr, c.resident.get(), c.view.dtype, c.view.dims};
}

// The trace build's capture of the same stage output as a production result.
const Captured* traced_twin(const TraceRun& run, const Captured& result) {
  for (const Captured& c : run.captured) {
    if (c.stage == result.stage && c.output == result.output) return comparable(c) ? &c : nullptr;
  }
  return nullptr;
}

struct HeadMetrics {
  Metrics end_to_end, local;
};

// Writes the rows of m into head (b, h) of t: every row, or those of a sample.
void set_rows(HostTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>* rows, const MatrixR& m) {
  if (t.empty()) return;  // not kept (only_reference keeps the bounds that decide)
  if (m.size() == 0) return;  // an exact reference's bounds: 0, as the tensor was made
  if (!rows) {
    set_head(t, b, h, m);
    return;
  }
  // m may hold more rows than the block (a reference computed past the existing extent).
  set_head_rows(t, b, h, *rows, m.topRows(static_cast<Eigen::Index>(rows->size())));
}

// `rows` (the head's query rows, or null: every row) as rows of the storage of a capture in
// `window`, which holds them from the window's first.
const std::vector<std::int64_t>* held_rows(const RowWindow& window, const std::vector<std::int64_t>* rows,
                                           std::vector<std::int64_t>& storage) {
  if (window.whole()) return rows;
  if (!rows) throw Error("a capture of a window of query rows judged for every row");
  storage.clear();
  for (std::int64_t r : *rows) {
    if (!window.holds(r)) throw Error("query row " + std::to_string(r) + " judged outside the captured window");
    storage.push_back(r - window.first);
  }
  return &storage;
}

MatrixR within_extent(const MatrixR& kernel, const MatrixR& reference, const Extent& e) {
  if (e.rows == kernel.rows() && e.cols == kernel.cols()) return kernel;
  MatrixR m = reference;
  m.topLeftCorner(e.rows, e.cols) = kernel.topLeftCorner(e.rows, e.cols);
  return m;
}

// The unit of evaluation: a head whole, or a block of its rows (ascending).
struct RowBlock {
  std::int64_t b = 0, h = 0;
  bool whole_head = true;
  std::vector<std::int64_t> rows;
};

// Every head whole where it is small; otherwise its rows in blocks of at most
// `block_elements` a tensor, and a row sample in blocks of the same size.
std::vector<RowBlock> row_blocks(const Problem& problem, const RowSample* sample, std::int64_t block_elements) {
  const Shape& shape = problem.shape;
  const bool sampled = sample && !sample->all;
  std::vector<RowBlock> blocks;
  for (std::int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    const std::int64_t b = bh / shape.heads, h = bh % shape.heads, q_len = problem.q_len_of(b);
    if (!sampled && row_blocks_of(shape.q_len, shape.kv_len, block_elements).size() <= 1) {
      blocks.push_back({b, h, true, {}});
      continue;
    }
    std::vector<std::int64_t> rows;  // existing rows only (varlen: rows past a sequence do not)
    if (sampled) {
      for (std::int64_t r : sample->per_head[static_cast<std::size_t>(bh)]) {
        if (r < q_len) rows.push_back(r);
      }
    }
    const auto ranges = row_blocks_of(sampled ? static_cast<std::int64_t>(rows.size()) : q_len, shape.kv_len, block_elements);
    if (ranges.empty()) blocks.push_back({b, h, false, {}});  // nothing of this head judged
    for (const std::vector<std::int64_t>& range : ranges) {
      RowBlock block{b, h, false, range};
      if (sampled) {
        for (std::int64_t& r : block.rows) r = rows[static_cast<std::size_t>(r)];
      }
      blocks.push_back(std::move(block));
    }
  }
  return blocks;
}

// An output's metrics over the blocks judged so far: the first block's, the others merged in.
// merge_metrics is order-free, so each thread folds the blocks it judges and the threads' folds
// are folded last: no block's metrics outlive it (a window of 1,16,65536 judged 496 blocks of
// 7168 outputs, 2.4 GB of them, then folded them output by output on one thread).
struct FoldedMetrics {
  bool any = false;
  HeadMetrics m;

  void add(const HeadMetrics& x) {
    if (!any) {
      m = x;
      any = true;
      return;
    }
    merge_metrics(m.end_to_end, x.end_to_end);
    merge_metrics(m.local, x.local);
  }
  void add(const FoldedMetrics& x) {
    if (x.any) add(x.m);
  }
};

// An output judged in no block keeps empty metrics.
void set_folded(OutputResult& r, const FoldedMetrics& f) {
  r.compared = true;
  r.end_to_end = f.m.end_to_end;
  r.local = f.m.local;
}

}  // namespace

QuantityMap captured_quantities(const Problem& problem, const TraceRun& run, std::int64_t b, std::int64_t h,
                                const QuantityMap& e2e, const std::vector<std::int64_t>* rows,
                                const HeadEvaluator* ev) {
  QuantityMap kernel;
  // Captures whose every element exists, by what they hold (a quantity of one split, one
  // shape and format): each group widened as one stack of tiles on a GPU (captured_each).
  struct Group {
    std::vector<QuantityKey> keys;
    std::vector<CapturedTensor> tensors;
    double scale;
    DType format;
  };
  // The trace build's captures hold the run's window of rows.
  std::vector<std::int64_t> storage;
  const std::vector<std::int64_t>* at = held_rows(run.window, rows, storage);
  std::map<std::tuple<Quantity, int, Dims, DType, double>, Group> groups;
  for (const Captured& c : run.captured) {
    if (!comparable(c)) continue;
    const Stage& stage = run.graph.stages[c.stage];
    const StageOutput& out = stage.outputs[c.output];
    const QuantityKey key = key_of(stage, out);
    Extent extent = existing_extent(problem, run.graph.algorithm, stage, out, b);
    const CapturedTensor copy = copy_of(c);
    const HeadLayout whole = head_layout(copy.dims, b, h);
    const std::int64_t held = rows ? static_cast<std::int64_t>(rows->size()) : whole.rows;
    if (rows) extent.rows = held;  // a block or sample holds existing rows only
    if (extent.rows == held && extent.cols == whole.cols) {  // every element exists: as captured
      Group& g = groups[{out.quantity, stage.split, copy.dims, copy.dtype, out.value_scale}];
      g.keys.push_back(key);
      g.tensors.push_back(copy);
      g.scale = out.value_scale;
      g.format = out.dtype;
      continue;
    }
    MatrixR values = captured_on_host(copy, b, h, at, out.value_scale, out.dtype).value;
    const Bounded& reference = e2e.at(key);
    values = within_extent(values, ev ? ev->to_host(reference).value : reference.value, extent);
    const Bounded exact = Bounded::exact(std::move(values), out.dtype);
    kernel[key] = ev ? ev->resident(exact) : exact;
  }
  for (auto& [what, g] : groups) {
    std::vector<Bounded> values;
    if (ev) {
      values = ev->captured_each(g.tensors, b, h, at, g.scale, g.format);
    } else {
      for (const CapturedTensor& t : g.tensors) values.push_back(captured_on_host(t, b, h, at, g.scale, g.format));
    }
    for (std::size_t i = 0; i < g.keys.size(); ++i) kernel[g.keys[i]] = std::move(values[i]);
  }
  return kernel;
}

std::vector<OutputComparison> compare_outputs(const HeadEvaluator& ev, const Problem& problem, const StageGraph& graph,
                                             const QuantityMap& e2e, const QuantityMap& kernel,
                                             const LocalReference& local,
                                             const std::vector<LocalReference::OutputRef>& outputs,
                                             const std::vector<HeadSpot>& spots, BoundChoice judged_by) {
  const std::size_t n = outputs.size();
  std::vector<OutputComparison> c(n);
  StepTimer timer = ev.step("stage-local references");
  std::vector<Bounded> locals = local.evaluate_all(outputs);
  timer.next("comparisons");
  // Against both references in one call: end to end first (items 0..n), then stage-local.
  std::vector<HeadEvaluator::CompareItem> items(2 * n);
  for (std::size_t j = 0; j < n; ++j) {
    const Stage& stage = *outputs[j].first;
    const StageOutput& out = *outputs[j].second;
    const QuantityKey key = key_of(stage, out);
    c[j].end_to_end_reference = &e2e.at(key);
    c[j].local_reference = std::move(locals[j]);
    // Only what exists is compared (varlen: rows and keys past a sequence's lengths do not).
    Extent e = existing_extent(problem, graph.algorithm, stage, out, spots[j].b);
    if (spots[j].rows) e.rows = static_cast<std::int64_t>(spots[j].rows->size());  // existing rows only
    const Bounded* kernel_values = &kernel.at(key);
    items[j] = {spots[j], kernel_values, c[j].end_to_end_reference, e.rows, e.cols, out.dtype};
    items[n + j] = {spots[j], kernel_values, &c[j].local_reference, e.rows, e.cols, out.dtype};
  }
  const std::vector<Metrics> metrics = ev.compare_each(items, judged_by);
  for (std::size_t j = 0; j < n; ++j) {
    c[j].end_to_end = metrics[j];
    c[j].local = metrics[n + j];
  }
  return c;
}

OutputComparison compare_output(const HeadEvaluator& ev, const Problem& problem, const StageGraph& graph,
                                const QuantityMap& e2e, const QuantityMap& kernel, const LocalReference& local,
                                const Stage& stage, const StageOutput& output, const HeadSpot& spot,
                                BoundChoice judged_by) {
  return compare_outputs(ev, problem, graph, e2e, kernel, local, {{&stage, &output}}, {spot}, judged_by)[0];
}

std::vector<OutputResult> evaluate_outputs(const AttentionInputs& inputs, const TraceRun& run,
                                           std::vector<OutputReferences>* references, BoundChoice judged_by,
                                           const RowSample* sample, std::int64_t block_elements,
                                           std::optional<std::size_t> only_reference,
                                           const EvaluatorSource& source, HeadKvCache* kv, StepProfile* profile) {
  const Shape& shape = inputs.problem.shape;
  const StageGraph& graph = run.graph;
  std::vector<OutputResult> results;
  std::vector<std::size_t> traced;  // indices into run.captured with a copy
  for (std::size_t i = 0; i < run.captured.size(); ++i) {
    results.push_back(describe(shape, graph, run.captured[i]));
    if (comparable(run.captured[i])) traced.push_back(i);
  }
  // The production build's results: against the FP64 reference end to end, and bit for bit
  // against the trace build's same output (their "stage-local" comparison).
  std::vector<std::size_t> produced;  // indices into run.production.results
  std::vector<const Captured*> twins;
  for (std::size_t i = 0; i < run.production.results.size(); ++i) {
    const Captured& c = run.production.results[i];
    OutputResult r = describe(shape, graph, c);
    r.production = true;
    r.name += " (production)";
    results.push_back(std::move(r));
    if (comparable(c)) {
      produced.push_back(i);
      twins.push_back(traced_twin(run, c));
    }
  }
  if (references) references->assign(run.captured.size(), {});
  if (traced.empty() && produced.empty()) return results;
  if (references) {
    for (std::size_t i : traced) {
      if (only_reference && i != *only_reference) continue;
      OutputReferences& r = (*references)[i];
      const bool tight = judged_by == BoundChoice::tight;
      for (HostTensor* t : {&r.end_to_end, &r.end_to_end_bound, &r.end_to_end_tight, &r.local, &r.local_bound,
                            &r.local_tight}) {
        // For attribution alone, the bound that does not decide is not kept.
        const bool deciding = t == &r.end_to_end || t == &r.local || (tight ? t == &r.end_to_end_tight || t == &r.local_tight
                                                                             : t == &r.end_to_end_bound || t == &r.local_bound);
        if (only_reference && !deciding) continue;
        *t = HostTensor(DType::f64, results[i].dims);
      }
    }
  }

  const std::vector<RowBlock> blocks = row_blocks(inputs.problem, sample, block_elements);
  const std::size_t output_count = traced.size() + produced.size();
  const int threads = parallel_threads(source.concurrency());
  std::vector<std::vector<FoldedMetrics>> folded(static_cast<std::size_t>(threads));  // by thread
  // K and V of each K/V head, shared by its blocks (HeadKvCache::Keep says how long it is kept).
  std::optional<HeadKvCache> own_cache;
  HeadKvCache& kv_cache = kv ? *kv : own_cache.emplace(inputs);
  if (&kv_cache.inputs() != &inputs) throw Error("evaluate_outputs: a K/V cache of other inputs");
  for (const RowBlock& block : blocks) {
    if (block.whole_head || !block.rows.empty()) kv_cache.expect(block.b, block.h);
  }
  parallel_for(static_cast<std::int64_t>(blocks.size()), [&](std::int64_t item, int thread) {
    const RowBlock& block = blocks[static_cast<std::size_t>(item)];
    const std::int64_t b = block.b, h = block.h;
    std::vector<FoldedMetrics>& mine = folded[static_cast<std::size_t>(thread)];
    if (mine.empty()) mine.resize(output_count);
    const std::vector<std::int64_t>* rows = block.whole_head ? nullptr : &block.rows;
    if (rows && rows->empty()) return;  // nothing of this head judged
    std::optional<StepTimer> inputs_step(std::in_place, profile, "head inputs and uploads");
    const HeadKv kv = kv_cache.take(b, h);
    const HeadInputs in = rows ? head_inputs(inputs, b, h, *rows, BiasForm::mask, kv)
                               : head_inputs(inputs, b, h, BiasForm::mask, kv);
    const std::unique_ptr<HeadEvaluator> ev = source.for_head(in);
    ev->profile_into(profile);
    if (profile) ev->finish_queued();
    inputs_step.reset();
    std::optional<StepTimer> step(ev->step("end-to-end references"));  // after ev: it finishes ev's work
    std::optional<StepTimer> teardown;  // before the block's tensors: it times their release
    const QuantityMap e2e = end_to_end_reference(*ev, shape, graph);
    step->next("captured outputs");
    const QuantityMap kernel = captured_quantities(inputs.problem, run, b, h, e2e, rows, ev.get());
    step->next("stage-local setup");
    const LocalReference local(*ev, shape, graph, e2e, kernel, inputs.problem.kv_len_of(b));
    step.reset();
    // Every output's stage-local reference, then its two comparisons, each kind evaluated as
    // one batch (a GPU evaluates a split's tiles at once and reads the metrics back once).
    std::vector<std::size_t> judged;  // indices into traced
    std::vector<LocalReference::OutputRef> outputs;
    std::vector<HeadSpot> spots;
    for (std::size_t n = 0; n < traced.size(); ++n) {
      const std::size_t i = traced[n];
      if (only_reference && i != *only_reference) continue;  // its references alone are wanted
      const Captured& c = run.captured[i];
      const Stage& stage = graph.stages[c.stage];
      const StageOutput& out = stage.outputs[c.output];
      judged.push_back(n);
      outputs.emplace_back(&stage, &out);
      HeadSpot spot{b, h, results[i].col_offset, is_row_quantity(out.quantity)};
      spot.rows = rows;
      spots.push_back(spot);
    }
    const std::vector<OutputComparison> compared =
        compare_outputs(*ev, inputs.problem, graph, e2e, kernel, local, outputs, spots, judged_by);
    if (references) step.emplace(ev->step("references kept"));
    for (std::size_t j = 0; j < judged.size(); ++j) {
      const OutputComparison& m = compared[j];
      mine[judged[j]].add(HeadMetrics{m.end_to_end, m.local});
      if (references) {  // each head writes its own slice: no two threads share elements
        OutputReferences& refs = (*references)[traced[judged[j]]];
        const Bounded e2e_ref = ev->to_host(*m.end_to_end_reference), local_ref = ev->to_host(m.local_reference);
        set_rows(refs.end_to_end, b, h, rows, e2e_ref.value);
        set_rows(refs.end_to_end_bound, b, h, rows, e2e_ref.bound);
        set_rows(refs.end_to_end_tight, b, h, rows, e2e_ref.tight);
        set_rows(refs.local, b, h, rows, local_ref.value);
        set_rows(refs.local_bound, b, h, rows, local_ref.bound);
        set_rows(refs.local_tight, b, h, rows, local_ref.tight);
      }
    }
    step.reset();
    if (only_reference) return;
    if (!produced.empty()) step.emplace(ev->step("production comparisons"));
    // Each result against the end-to-end reference, and bit for bit against the trace build's
    // (its captured values: an exact reference, every bound 0), all in one comparison call.
    std::vector<Bounded> values;
    values.reserve(produced.size());  // the items point into it
    std::vector<HeadEvaluator::CompareItem> items, against_trace;
    std::vector<std::size_t> twin_item(produced.size(), produced.size());
    for (std::size_t n = 0; n < produced.size(); ++n) {
      const Captured& c = run.production.results[produced[n]];
      const Stage& stage = graph.stages[c.stage];
      const StageOutput& out = stage.outputs[c.output];
      const QuantityKey key = key_of(stage, out);
      HeadSpot spot{b, h, 0, is_row_quantity(out.quantity)};
      spot.rows = rows;
      Extent e = existing_extent(inputs.problem, graph.algorithm, stage, out, b);
      if (rows) e.rows = static_cast<std::int64_t>(rows->size());
      std::vector<std::int64_t> held;
      values.push_back(ev->captured(copy_of(c), b, h, held_rows(c.window, rows, held), out.value_scale, out.dtype));
      items.push_back({spot, &values.back(), &e2e.at(key), e.rows, e.cols, out.dtype});
      if (twins[n]) {
        twin_item[n] = against_trace.size();
        against_trace.push_back({spot, &values.back(), &kernel.at(key), e.rows, e.cols, out.dtype});
      }
    }
    items.insert(items.end(), against_trace.begin(), against_trace.end());
    const std::vector<Metrics> metrics = ev->compare_each(items, judged_by);
    for (std::size_t n = 0; n < produced.size(); ++n) {
      HeadMetrics m{metrics[n], Metrics{}};
      if (twin_item[n] < produced.size()) m.local = metrics[produced.size() + twin_item[n]];
      mine[traced.size() + n].add(m);
    }
    step.reset();
    if (profile) teardown.emplace(ev->step("releasing the block's tensors"));
  }, source.concurrency());
  std::vector<FoldedMetrics> total(output_count);
  for (const std::vector<FoldedMetrics>& of_thread : folded) {
    for (std::size_t n = 0; n < of_thread.size(); ++n) total[n].add(of_thread[n]);
  }
  for (std::size_t n = 0; n < traced.size(); ++n) set_folded(results[traced[n]], total[n]);
  for (std::size_t n = 0; n < produced.size(); ++n) {
    OutputResult& r = results[run.captured.size() + produced[n]];
    set_folded(r, total[traced.size() + n]);
    r.compared_with_trace = twins[n] != nullptr;
  }
  return results;
}

}  // namespace fc

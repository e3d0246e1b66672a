#include "harness/io/snapshot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/numeric.h"
#include "stages/cublaslt/descriptor_json.h"

namespace fc {
namespace {

const StageKind kKinds[] = {StageKind::qk,        StageKind::softmax, StageKind::rescale, StageKind::pv,
                            StageKind::normalize, StageKind::lse,     StageKind::combine};
const Quantity kQuantities[] = {Quantity::scores,       Quantity::probs,  Quantity::p_tilde, Quantity::row_max,
                                Quantity::row_sum,      Quantity::rescaled_acc, Quantity::acc, Quantity::output,
                                Quantity::partial_output, Quantity::partial_lse, Quantity::lse};

const char* algorithm_name(Algorithm::Kind k) {
  switch (k) {
    case Algorithm::Kind::full: return "full";
    case Algorithm::Kind::blocked: return "blocked";
    case Algorithm::Kind::split: return "split";
  }
  return "full";
}

// Reading with one clear error for each way a file can be wrong.
class Fields {
 public:
  Fields(const H5Reader& in, std::string object) : in_(in), object_(std::move(object)) {}
  std::string text(const std::string& name) const { return need(in_.string_attribute(object_, name), name); }
  std::int64_t integer(const std::string& name) const { return need(in_.int_attribute(object_, name), name); }
  double real(const std::string& name) const { return need(in_.double_attribute(object_, name), name); }
  std::vector<std::int64_t> integers(const std::string& name) const {
    return need(in_.int_list_attribute(object_, name), name);
  }
  [[noreturn]] void fail(const std::string& what) const { throw file_error(in_.path(), object_ + ": " + what); }

 private:
  template <class T>
  T need(const std::optional<T>& v, const std::string& name) const {
    if (!v) fail("missing attribute '" + name + "'");
    return *v;
  }
  const H5Reader& in_;
  std::string object_;
};

template <class E, std::size_t N>
E parse_enum(const Fields& f, const std::string& text, const E (&values)[N], const char* (*name)(E)) {
  for (E v : values) {
    if (text == name(v)) return v;
  }
  f.fail("unknown value '" + text + "'");
}

DType parse_dtype_field(const Fields& f, const std::string& text) {
  const std::optional<DType> t = parse_dtype(text);
  if (!t) f.fail("unknown dtype '" + text + "'");
  return *t;
}

void write_metrics(H5Writer& out, const std::string& object, const std::string& prefix, const Metrics& m) {
  out.set_attribute(object, prefix + ".elements", m.elements);
  out.set_attribute(object, prefix + ".max_abs_error", m.max_abs_error);
  out.set_attribute(object, prefix + ".max_rel_error", m.max_rel_error);
  out.set_attribute(object, prefix + ".max_normalized_error", m.max_normalized_error);
  out.set_attribute(object, prefix + ".over_bound", m.over_bound);
  out.set_attribute(object, prefix + ".max_tight_error", m.max_tight_error);
  out.set_attribute(object, prefix + ".over_tight", m.over_tight);
  out.set_attribute(object, prefix + ".max_ulp", m.max_ulp);
  if (m.first_failure) {
    const Index4& i = m.first_failure->index;
    out.set_attribute(object, prefix + ".first_failure", std::vector<std::int64_t>{i.b, i.h, i.row, i.col});
  }
}

void write_flags(H5Writer& out, const std::string& object, const FlagCounts& f) {
  const std::pair<const char*, unsigned long long> counts[] = {
      {"flags.nan", f.nan},
      {"flags.pos_inf", f.pos_inf},
      {"flags.neg_inf", f.neg_inf},
      {"flags.subnormal", f.subnormal},
      {"flags.unwritten", f.unwritten},
      {"flags.foreign_poison", f.foreign_poison},
      {"flags.first_nan", f.first_nan},
      {"flags.first_inf", f.first_inf},
      {"flags.first_unwritten", f.first_unwritten},
      {"flags.first_foreign", f.first_foreign}};
  for (const auto& [name, value] : counts) out.set_attribute(object, name, static_cast<std::int64_t>(value));
  out.set_attribute(object, "flags.max_abs_bits", static_cast<std::int64_t>(f.max_abs_bits));
}

FlagCounts read_flags(const Fields& f) {
  FlagCounts flags;
  auto u = [&](const char* name) { return static_cast<unsigned long long>(f.integer(name)); };
  flags.nan = u("flags.nan");
  flags.pos_inf = u("flags.pos_inf");
  flags.neg_inf = u("flags.neg_inf");
  flags.subnormal = u("flags.subnormal");
  flags.unwritten = u("flags.unwritten");
  flags.foreign_poison = u("flags.foreign_poison");
  flags.first_nan = u("flags.first_nan");
  flags.first_inf = u("flags.first_inf");
  flags.first_unwritten = u("flags.first_unwritten");
  flags.first_foreign = u("flags.first_foreign");
  flags.max_abs_bits = static_cast<unsigned>(f.integer("flags.max_abs_bits"));
  return flags;
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (std::size_t i = 0; i < lines.size(); ++i) s += (i ? "\n" : "") + lines[i];
  return s;
}

std::vector<std::string> split_lines(const std::string& s, char sep = '\n') {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string line;
  while (std::getline(in, line, sep)) out.push_back(line);
  return out;
}

void write_graph(H5Writer& out, const StageGraph& g) {
  out.ensure_group("/graph");
  out.set_attribute("/graph", "algorithm", algorithm_name(g.algorithm.kind));
  out.set_attribute("/graph", "tile_width", g.algorithm.tile_width);
  out.set_attribute("/graph", "splits", g.algorithm.splits);
  out.set_attribute("/graph", "stages", static_cast<std::int64_t>(g.stages.size()));
  for (StageKind k : kKinds) {
    const Arithmetic& a = arithmetic_of(g.arithmetic, k);
    const std::string prefix = stage_kind_name(k);
    out.set_attribute("/graph", prefix + ".out", dtype_name(a.out));
    out.set_attribute("/graph", prefix + ".operand", dtype_name(a.operand));
    out.set_attribute("/graph", prefix + ".tensor_cores", std::int64_t{a.tensor_cores ? 1 : 0});
  }
}

StageGraph read_graph(const H5Reader& in) {
  if (!in.exists("/graph")) throw file_error(in.path(), "/graph: missing group (not a snapshot?)");
  const Fields f(in, "/graph");
  StageGraph g;
  const std::string algorithm = f.text("algorithm");
  if (algorithm == "full") g.algorithm.kind = Algorithm::Kind::full;
  else if (algorithm == "blocked") g.algorithm.kind = Algorithm::Kind::blocked;
  else if (algorithm == "split") g.algorithm.kind = Algorithm::Kind::split;
  else f.fail("unknown algorithm '" + algorithm + "'");
  g.algorithm.tile_width = f.integer("tile_width");
  g.algorithm.splits = f.integer("splits");
  if (g.algorithm.kind != Algorithm::Kind::full && (g.algorithm.tile_width < 1 || g.algorithm.tile_width > (1 << 20))) {
    f.fail("tile_width out of range");
  }
  if (g.algorithm.kind == Algorithm::Kind::split && (g.algorithm.splits < 1 || g.algorithm.splits > 4096)) {
    f.fail("splits out of range");
  }
  for (StageKind k : kKinds) {
    Arithmetic& a = arithmetic_of(g.arithmetic, k);
    const std::string prefix = stage_kind_name(k);
    a.out = parse_dtype_field(f, f.text(prefix + ".out"));
    a.operand = parse_dtype_field(f, f.text(prefix + ".operand"));
    a.tensor_cores = f.integer(prefix + ".tensor_cores") != 0;
    if (!is_floating(a.out) || !is_floating(a.operand)) f.fail(prefix + ": arithmetic formats must be floating");
  }
  const std::int64_t stages = f.integer("stages");
  if (stages < 1 || stages > 100000) f.fail("stage count out of range");
  g.stages.resize(static_cast<std::size_t>(stages));
  return g;
}

void write_divergence(H5Writer& out, const Divergence& d) {
  const std::string o = "/result/first_divergence";
  out.ensure_group(o);
  out.set_attribute(o, "stage", d.stage);
  out.set_attribute(o, "output", d.output);
  out.set_attribute(o, "kind", d.kind);
  out.set_attribute(o, "split", std::int64_t{d.split});
  out.set_attribute(o, "page", std::int64_t{d.page});
  out.set_attribute(o, "index", std::vector<std::int64_t>{d.index.b, d.index.h, d.index.row, d.index.col});
  out.set_attribute(o, "cause", d.cause);
  out.set_attribute(o, "evidence", d.evidence);
  out.set_attribute(o, "stage_local", std::int64_t{d.stage_local ? 1 : 0});
  if (d.kernel) out.set_attribute(o, "kernel", *d.kernel);
  if (d.reference) out.set_attribute(o, "reference", *d.reference);
  if (d.bound) out.set_attribute(o, "bound", *d.bound);
  if (d.tight) out.set_attribute(o, "tight", *d.tight);
}

Divergence read_divergence(const H5Reader& in) {
  const std::string o = "/result/first_divergence";
  const Fields f(in, o);
  Divergence d;
  d.stage = f.text("stage");
  d.output = f.text("output");
  d.kind = f.text("kind");
  d.split = static_cast<int>(f.integer("split"));
  d.page = static_cast<int>(f.integer("page"));
  const std::vector<std::int64_t> i = f.integers("index");
  if (i.size() != 4) f.fail("index must be [b, h, row, col]");
  d.index = {i[0], i[1], i[2], i[3]};
  d.cause = f.text("cause");
  d.evidence = f.text("evidence");
  d.stage_local = f.integer("stage_local") != 0;
  d.kernel = in.double_attribute(o, "kernel");
  d.reference = in.double_attribute(o, "reference");
  d.bound = in.double_attribute(o, "bound");
  d.tight = in.double_attribute(o, "tight");  // schema 2 on
  return d;
}

void write_descriptors(H5Writer& out, const std::vector<DescriptorReport>& reports) {
  for (std::size_t k = 0; k < reports.size(); ++k) {
    const DescriptorReport& r = reports[k];
    const std::string o = "/descriptors/" + std::to_string(k);
    out.ensure_group(o);
    out.set_attribute(o, "stage", static_cast<std::int64_t>(r.stage));
    out.set_attribute(o, "launched", std::int64_t{r.launched ? 1 : 0});
    out.set_attribute(o, "name", r.record.name);
    out.set_attribute(o, "record_json", json_text(record_json(r.record)));
    std::vector<std::string> findings;
    for (const LintFinding& f : r.findings) findings.push_back(f.rule + "\t" + f.operand + "\t" + f.message);
    out.set_attribute(o, "findings", joined_lines(findings));
  }
}

std::vector<DescriptorReport> read_descriptors(const H5Reader& in, std::size_t stages) {
  std::vector<DescriptorReport> reports;
  if (!in.exists("/descriptors")) return reports;
  for (const std::string& child : in.children("/descriptors")) {
    const std::string o = "/descriptors/" + child;
    const Fields f(in, o);
    DescriptorReport r;
    const std::int64_t stage = f.integer("stage");
    if (stage < 0 || static_cast<std::size_t>(stage) >= stages) f.fail("stage index out of range");
    r.stage = static_cast<std::size_t>(stage);
    r.launched = f.integer("launched") != 0;
    r.record.name = f.text("name");
    for (const std::string& line : split_lines(f.text("findings"))) {
      const std::vector<std::string> parts = split_lines(line, '\t');
      if (parts.size() != 3) f.fail("malformed lint finding");
      r.findings.push_back({parts[0], parts[1], parts[2]});
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

// The production build's results (schema 2 on): /production/<index>, with the build's error
// and buffer names as attributes of /production.
void write_production(H5Writer& out, const TraceRun& run, const CaseResult& result) {
  const ProductionRun& p = run.production;
  if (!p.ran()) return;
  out.ensure_group("/production");
  out.set_attribute("/production", "error", p.error);
  out.set_attribute("/production", "buffers", joined_lines(p.buffer_names));
  for (std::size_t n = 0; n < p.results.size(); ++n) {
    const Captured& c = p.results[n];
    const std::string o = "/production/" + std::to_string(n);
    out.ensure_group(o);
    out.set_attribute(o, "stage_index", static_cast<std::int64_t>(c.stage));
    out.set_attribute(o, "output_index", static_cast<std::int64_t>(c.output));
    out.set_attribute(o, "captured", std::int64_t{c.present ? 1 : 0});
    out.set_attribute(o, "capture_problem", c.problem);
    out.set_attribute(o, "buffer_id", std::int64_t{c.view.buffer_id});
    write_flags(out, o, c.flags);
    const std::size_t i = run.captured.size() + n;
    const bool keep = !c.tensor.empty();  // a result is small: always kept
    out.set_attribute(o, "stored", std::int64_t{keep ? 1 : 0});
    if (keep) out.write_tensor(o + "/data", c.tensor);
    if (i < result.outputs.size()) {
      const OutputResult& r = result.outputs[i];
      out.set_attribute(o, "name", r.name);
      out.set_attribute(o, "verdict", r.passed() ? "pass" : "fail");
      if (r.compared) {
        write_metrics(out, o, "end_to_end", r.end_to_end);
        write_metrics(out, o, "versus_trace", r.local);
      }
    }
  }
}

// One captured output's record (/stages/N or /production/N): its flags, view and, when
// stored, its tensor, which must have the dims and dtype its stage declares.
Captured read_captured(const H5Reader& in, const std::string& o, const Fields& f, const StageGraph& g,
                       const Shape& shape, std::size_t stage_index, std::size_t output_index, std::size_t buffers) {
  const Stage& stage = g.stages[stage_index];
  const StageOutput& output = stage.outputs[output_index];
  Captured c;
  c.stage = stage_index;
  c.output = output_index;
  c.present = f.integer("captured") != 0;
  c.problem = f.text("capture_problem");
  c.flags = read_flags(f);
  forget_unknown_poison(c.flags, buffers);
  c.view.dtype = output.dtype;
  c.view.buffer_id = static_cast<int>(f.integer("buffer_id"));
  if (c.view.buffer_id < 0 || static_cast<std::size_t>(c.view.buffer_id) >= buffers) f.fail("buffer id out of range");
  try {
    c.view.dims = output_dims(shape, g.algorithm, stage, output);
  } catch (const Error& e) {
    f.fail(e.what());
  }
  if (f.integer("stored") != 0) {
    if (!in.exists(o + "/data")) f.fail("stored, but data is missing");
    c.tensor = in.read_tensor(o + "/data");
    if (c.tensor.dims() != c.view.dims || c.tensor.dtype() != output.dtype) {
      throw file_error(in.path(), o + "/data: " + dtype_name(c.tensor.dtype()) + " " + dims_string(c.tensor.dims()) +
                                      ", the stage says " + dtype_name(output.dtype) + " " + dims_string(c.view.dims));
    }
  }
  return c;
}

ProductionRun read_production(const H5Reader& in, const StageGraph& g, const Shape& shape) {
  ProductionRun p;
  if (!in.exists("/production")) return p;  // schema 1, or a run without one
  const Fields top(in, "/production");
  p.error = top.text("error");
  p.buffer_names = split_lines(top.text("buffers"));
  if (p.buffer_names.empty()) p.buffer_names.push_back("");
  std::map<std::int64_t, std::string> by_index;
  for (const std::string& name : in.children("/production")) {
    char* end = nullptr;
    const long long index = std::strtoll(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || index < 0) throw file_error(in.path(), "/production/" + name + ": not an index");
    by_index.emplace(index, name);
  }
  for (const auto& [index, name] : by_index) {
    const std::string o = "/production/" + name;
    if (index != static_cast<std::int64_t>(p.results.size())) throw file_error(in.path(), "/production: a result is missing");
    const Fields f(in, o);
    const std::int64_t stage_index = f.integer("stage_index"), output_index = f.integer("output_index");
    if (stage_index < 0 || static_cast<std::size_t>(stage_index) >= g.stages.size() || output_index < 0 ||
        static_cast<std::size_t>(output_index) >= g.stages[static_cast<std::size_t>(stage_index)].outputs.size()) {
      f.fail("stage or output index out of range");
    }
    const Stage& stage = g.stages[static_cast<std::size_t>(stage_index)];
    const StageOutput& output = stage.outputs[static_cast<std::size_t>(output_index)];
    if (!is_result(output.quantity)) f.fail("not a result of a production build");
    p.results.push_back(read_captured(in, o, f, g, shape, static_cast<std::size_t>(stage_index),
                                      static_cast<std::size_t>(output_index), p.buffer_names.size()));
  }
  return p;
}

}  // namespace

bool stage_selected(const std::vector<std::string>& selection, const std::string& name) {
  if (selection.empty()) return true;
  for (const std::string& s : selection) {
    if (name == s) return true;
    // A stage kind or stage name selects its outputs: "pv" selects "pv[3]", "softmax[0]" selects "softmax[0].max".
    if (name.rfind(s, 0) == 0 && (name[s.size()] == '[' || name[s.size()] == '.')) return true;
  }
  return false;
}

void add_output_names(const StageGraph& graph, std::vector<std::string>& names) {
  for (const Stage& stage : graph.stages) {
    for (std::size_t o = 0; o < stage.outputs.size(); ++o) names.push_back(stage.output_name(o));
  }
}

void require_selections(const std::string& option, const std::vector<std::string>& selection,
                        const std::vector<std::string>& outputs) {
  for (const std::string& name : selection) {
    const bool selects = std::any_of(outputs.begin(), outputs.end(),
                                     [&](const std::string& output) { return stage_selected({name}, output); });
    if (selects) continue;
    std::set<std::string> kinds;  // "softmax[3].max" is of the kind softmax
    for (const std::string& output : outputs) kinds.insert(output.substr(0, output.find_first_of("[.")));
    std::string listed;
    for (const std::string& kind : kinds) listed += (listed.empty() ? "" : ", ") + kind;
    throw Error(option + " '" + name + "': selects no stage output (the stages here: " + listed +
                "; [j] and .output select within them)");
  }
}

void write_snapshot(const std::string& path, const std::string& command, const AttentionInputs& inputs,
                    const TraceRun& run, const CaseResult& result, const std::vector<OutputReferences>& references,
                    const SnapshotOptions& options) {
  H5Writer out(path);
  write_header(out, options.kind, command, result.description, inputs);
  out.set_attribute("/meta", "impl", result.impl);
  out.set_attribute("/meta", "fault", options.fault);
  out.set_attribute("/meta", "buffers", joined_lines(run.buffer_names));
  write_inputs(out, inputs);
  write_graph(out, run.graph);
  for (std::size_t i = 0; i < run.captured.size(); ++i) {
    const Captured& c = run.captured[i];
    const Stage& stage = run.graph.stages[c.stage];
    const StageOutput& output = stage.outputs[c.output];
    // A run that failed has captures but no comparison: describe them from the graph.
    OutputResult r;
    if (i < result.outputs.size()) r = result.outputs[i];
    else r.name = stage.output_name(c.output);
    const std::string o = "/stages/" + r.name;
    out.ensure_group(o);
    out.set_attribute(o, "index", static_cast<std::int64_t>(i));
    out.set_attribute(o, "stage_index", static_cast<std::int64_t>(c.stage));
    out.set_attribute(o, "output_index", static_cast<std::int64_t>(c.output));
    out.set_attribute(o, "kind", stage_kind_name(stage.kind));
    out.set_attribute(o, "split", std::int64_t{stage.split});
    out.set_attribute(o, "page", std::int64_t{stage.tile});
    out.set_attribute(o, "reads_own_output", std::int64_t{stage.reads_own_output ? 1 : 0});
    out.set_attribute(o, "output", output.name);
    out.set_attribute(o, "quantity", quantity_name(output.quantity));
    out.set_attribute(o, "dtype", dtype_name(output.dtype));
    out.set_attribute(o, "value_scale", output.value_scale);
    out.set_attribute(o, "captured", std::int64_t{c.present ? 1 : 0});
    out.set_attribute(o, "capture_problem", c.problem);
    out.set_attribute(o, "buffer_id", std::int64_t{c.view.buffer_id});
    out.set_attribute(o, "verdict", r.passed() ? "pass" : "fail");
    write_flags(out, o, c.flags);
    const bool keep = stage_selected(options.stages, r.name) && !c.tensor.empty();
    out.set_attribute(o, "stored", std::int64_t{keep ? 1 : 0});
    if (keep) {
      out.write_tensor(o + "/data", c.tensor);
      const OutputReferences& refs = references.at(i);
      const bool final_output = i + 1 == run.captured.size();
      if (!refs.end_to_end.empty() && (final_output || !options.final_reference_only)) {
        out.write_tensor(o + "/reference", refs.end_to_end);
        out.write_tensor(o + "/bound", refs.end_to_end_bound);
        out.write_tensor(o + "/tight", refs.end_to_end_tight);
        out.write_tensor(o + "/local_reference", refs.local);
        out.write_tensor(o + "/local_bound", refs.local_bound);
        out.write_tensor(o + "/local_tight", refs.local_tight);
      }
    }
    if (r.compared) {
      write_metrics(out, o, "end_to_end", r.end_to_end);
      write_metrics(out, o, "local", r.local);
    }
  }
  write_production(out, run, result);
  write_descriptors(out, run.descriptors);
  out.ensure_group("/result");
  out.set_attribute("/result", "verdict", verdict_name(result.verdict));
  out.set_attribute("/result", "reason", result.reason);
  out.set_attribute("/result", "algorithm", result.algorithm);
  if (result.divergence) write_divergence(out, *result.divergence);
  out.commit();
}

Snapshot read_snapshot(const H5Reader& in) {
  Snapshot s;
  s.file = read_case_file(in);
  if (s.file.kind == "reference") {
    throw file_error(in.path(), "this is a reference file (from `flashcore-check reference`), not a snapshot");
  }
  if (s.file.kind == "report") {
    throw file_error(in.path(), "this is a bug report, not a snapshot: `flashcore-check triage` reads it");
  }
  const Fields meta(in, "/meta");
  s.impl = meta.text("impl");
  s.fault = meta.text("fault");
  s.run.buffer_names = split_lines(meta.text("buffers"));
  if (s.run.buffer_names.empty()) s.run.buffer_names.push_back("");
  s.run.graph = read_graph(in);
  StageGraph& g = s.run.graph;
  const Shape& shape = s.file.inputs.problem.shape;

  if (!in.exists("/stages")) throw file_error(in.path(), "/stages: missing group");
  std::map<std::int64_t, std::string> by_index;
  for (const std::string& name : in.children("/stages")) {
    const std::int64_t index = Fields(in, "/stages/" + name).integer("index");
    if (index < 0 || !by_index.emplace(index, name).second) {
      throw file_error(in.path(), "/stages/" + name + ": duplicate or negative index");
    }
  }
  std::vector<bool> seen(g.stages.size(), false);
  for (const auto& [index, name] : by_index) {
    if (index != static_cast<std::int64_t>(s.run.captured.size())) {
      throw file_error(in.path(), "/stages: output " + std::to_string(s.run.captured.size()) + " is missing");
    }
    const std::string o = "/stages/" + name;
    const Fields f(in, o);
    const std::int64_t stage_index = f.integer("stage_index"), output_index = f.integer("output_index");
    if (stage_index < 0 || static_cast<std::size_t>(stage_index) >= g.stages.size() || output_index < 0 ||
        output_index > 16) {
      f.fail("stage or output index out of range");
    }
    Stage& stage = g.stages[static_cast<std::size_t>(stage_index)];
    if (!seen[static_cast<std::size_t>(stage_index)]) {
      seen[static_cast<std::size_t>(stage_index)] = true;
      stage.kind = parse_enum(f, f.text("kind"), kKinds, stage_kind_name);
      const std::int64_t split = f.integer("split"), page = f.integer("page");
      if (split < -1 || split > (1 << 24) || page < -1 || page > (1 << 24)) f.fail("split or page out of range");
      stage.split = static_cast<int>(split);
      stage.tile = static_cast<int>(page);
      stage.reads_own_output = f.integer("reads_own_output") != 0;
    }
    if (output_index != static_cast<std::int64_t>(stage.outputs.size())) f.fail("outputs of a stage out of order");
    StageOutput output{f.text("output"), parse_enum(f, f.text("quantity"), kQuantities, quantity_name),
                       parse_dtype_field(f, f.text("dtype")), f.real("value_scale")};
    stage.outputs.push_back(output);
    try {  // its place in the graph, before anything reads the capture by it
      check_stage_placement(shape, g.algorithm, stage);
    } catch (const Error& e) {
      f.fail(e.what());
    }

    s.run.captured.push_back(read_captured(in, o, f, g, shape, static_cast<std::size_t>(stage_index),
                                           static_cast<std::size_t>(output_index), s.run.buffer_names.size()));
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
    throw file_error(in.path(), "/stages: a stage of /graph has no output");
  }
  s.run.descriptors = read_descriptors(in, g.stages.size());
  s.run.production = read_production(in, g, shape);

  const Fields result(in, "/result");
  s.recorded.impl = s.impl;
  s.recorded.description = s.file.description;
  const std::string verdict = result.text("verdict");
  const Verdict verdicts[] = {Verdict::pass, Verdict::diverged, Verdict::error, Verdict::skipped};
  s.recorded.verdict = parse_enum(result, verdict, verdicts, verdict_name);
  s.recorded.reason = result.text("reason");
  s.recorded.algorithm = result.text("algorithm");
  if (in.exists("/result/first_divergence")) s.recorded.divergence = read_divergence(in);
  return s;
}

}  // namespace fc

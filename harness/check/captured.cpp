#include "harness/check/captured.h"

#include <cstring>
#include <tuple>

#include "core/error.h"

namespace fc {
namespace {

// The most splits a capture may hold: each split's partials take two of the workspace's
// poison ids.
constexpr std::int64_t kMaxSplits = 16;

// One tensor of the capture, where the stage graph declares it.
struct Slot {
  std::size_t stage = 0, output = 0;
  std::string buffer;  // "out", "partial_out[1]"
  HostTensor tensor;   // in the logical dims of the stage output
};

class Captured final : public Implementation {
 public:
  Captured(std::string name, std::string source, StageGraph graph, std::vector<Slot> slots)
      : name_(std::move(name)), source_(std::move(source)), graph_(std::move(graph)), slots_(std::move(slots)) {}

  std::string name() const override { return name_; }
  std::string summary() const override { return "outputs captured in " + source_; }
  bool on_gpu() const override { return false; }
  bool has_production_build() const override { return false; }
  StageGraph stage_graph(const Problem&) const override { return graph_; }

  void prepare(const Problem&, Workspace& ws, bool) override {
    buffers_.clear();
    for (const Slot& s : slots_) buffers_.push_back(&ws.allocate(s.buffer, s.tensor.dtype(), s.tensor.numel()));
  }

  // The values come from a file, never from a buffer this run poisoned.
  bool poisons_its_buffers() const override { return false; }

  // The kernel wrote these values: copied over the poison, as a kernel's stores would be.
  void run(RunContext& ctx) override {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      std::memcpy(buffers_[i]->data, s.tensor.data(), s.tensor.nbytes());
      if (ctx.tap) ctx.tap->capture(s.stage, s.output, buffers_[i]->view(s.tensor.dims()));
    }
  }

 private:
  std::string name_, source_;
  StageGraph graph_;
  std::vector<Slot> slots_;
  std::vector<Buffer*> buffers_;
};

// Builds the graph stage by stage from the tensors present.
class GraphBuilder {
 public:
  explicit GraphBuilder(const CaptureFile& capture) : capture_(capture) {}

  const HostTensor* find(const std::string& name) const {
    const auto it = capture_.outputs.find(name);
    return it == capture_.outputs.end() ? nullptr : &it->second;
  }

  // A stage of the given outputs (name in the capture, quantity, output name), those present.
  void stage(StageKind kind, int split, const std::vector<std::tuple<std::string, Quantity, std::string>>& outputs) {
    Stage st{kind, split, -1, {}};
    for (const auto& [file_name, quantity, output_name] : outputs) {
      const HostTensor* t = find(file_name);
      if (!t) continue;
      add(st, file_name, *t, quantity, output_name);
    }
    if (!st.outputs.empty()) graph.stages.push_back(std::move(st));
  }

  // Split t's partials: a slice of [B,H,T,rows(,D)].
  void split_stage(int t) {
    Stage st{StageKind::normalize, t, -1, {}};
    add(st, "partial_out[" + std::to_string(t) + "]", slice(*find("partial_out"), t), Quantity::partial_output, "");
    add(st, "partial_lse[" + std::to_string(t) + "]", slice(*find("partial_lse"), t), Quantity::partial_lse, "lse");
    graph.stages.push_back(std::move(st));
  }

  StageGraph graph;
  std::vector<Slot> slots;

 private:
  void add(Stage& st, const std::string& buffer, const HostTensor& t, Quantity quantity, const std::string& name) {
    st.outputs.push_back({name, quantity, t.dtype()});
    slots.push_back({graph.stages.size(), st.outputs.size() - 1, buffer, t});
  }

  static HostTensor slice(const HostTensor& t, int split) {
    Dims dims = t.dims();
    const std::int64_t splits = dims[2];
    dims.erase(dims.begin() + 2);
    HostTensor out(t.dtype(), dims);
    const std::size_t block = static_cast<std::size_t>(numel_of(dims) / (dims[0] * dims[1])) * dtype_size(t.dtype());
    const auto* from = static_cast<const std::uint8_t*>(t.data());
    auto* to = static_cast<std::uint8_t*>(out.data());
    for (std::int64_t bh = 0; bh < dims[0] * dims[1]; ++bh) {
      std::memcpy(to + bh * block, from + (bh * splits + split) * block, block);
    }
    return out;
  }

  const CaptureFile& capture_;
};

// A stored tensor holds values of the declared format: the same format, or fp32, which
// holds fp16 and bf16 values exactly.
void check_holds(const std::string& path, const std::string& name, const HostTensor* t, DType declared,
                 const std::string& role) {
  if (!t || t->dtype() == declared || t->dtype() == DType::f32) return;
  throw file_error(path, "'" + name + "' is stored as " + dtype_name(t->dtype()) + " but the arithmetic says the " +
                             role + " are " + dtype_name(declared) + " (see --arithmetic)");
}

}  // namespace

std::unique_ptr<Implementation> make_captured_implementation(const AttentionInputs& inputs, const CaptureFile& capture,
                                                             const ArithmeticSpec& spec) {
  const std::string& path = capture.path;
  const Shape& s = inputs.problem.shape;
  GraphBuilder g(capture);

  const DType input = spec.input.value_or(inputs.problem.dtype);
  if (input != inputs.problem.dtype) {
    throw file_error(path, std::string("q, k and v are ") + dtype_name(inputs.problem.dtype) +
                               " but the arithmetic says the inputs are " + dtype_name(input) + " (see --arithmetic)");
  }
  const Dims rows{s.batch, s.heads, s.q_len}, scores{s.batch, s.heads, s.q_len, s.kv_len},
      out{s.batch, s.heads, s.q_len, s.head_dim};
  const std::pair<const char*, Dims> expected[] = {{"out", out},         {"lse", rows},     {"scores", scores},
                                                   {"probs", scores},    {"row_max", rows}, {"row_sum", rows}};
  for (const auto& [name, dims] : expected) {
    const HostTensor* t = g.find(name);
    if (t && t->dims() != dims) {
      throw file_error(path, std::string("'") + name + "' has shape " + dims_string(t->dims()) + "; the inputs give " +
                                 dims_string(dims) + " (q " + dims_string(inputs.q.dims()) + ", k " +
                                 dims_string(inputs.k.dims()) + ")");
    }
  }

  const HostTensor* partial_out = g.find("partial_out");
  const HostTensor* partial_lse = g.find("partial_lse");
  const bool split = partial_out || partial_lse;
  std::int64_t splits = 0;
  if (split) {
    if (!partial_out || !partial_lse) throw file_error(path, "per-split partials need both 'partial_out' and 'partial_lse'");
    splits = partial_out->rank() == 5 ? partial_out->dim(2) : 0;
    const Dims want_out{s.batch, s.heads, splits, s.q_len, s.head_dim}, want_lse{s.batch, s.heads, splits, s.q_len};
    if (splits < 1 || partial_out->dims() != want_out || partial_lse->dims() != want_lse) {
      throw file_error(path, "'partial_out' " + dims_string(partial_out->dims()) + " and 'partial_lse' " +
                                 dims_string(partial_lse->dims()) + " must be [B,H,T,Sq,D] and [B,H,T,Sq] with B,H,Sq,D " +
                                 dims_string({s.batch, s.heads, s.q_len, s.head_dim}) + " from the inputs");
    }
    if (splits > kMaxSplits) throw file_error(path, "more than " + std::to_string(kMaxSplits) + " splits");
    if (capture.tile_width < 1) throw file_error(path, "per-split partials need 'tile_width' (keys per tile of a split)");
    for (const char* whole_row : {"scores", "probs", "row_max", "row_sum"}) {
      if (g.find(whole_row)) {
        throw file_error(path, std::string("'") + whole_row + "' is a whole-row quantity: it cannot be checked beside "
                                                               "per-split partials");
      }
    }
  } else if (capture.tile_width > 0) {
    throw file_error(path, "'tile_width' is given but there are no per-split partials");
  }
  bool any = false;
  for (const std::string& name : capture_output_names()) any = any || g.find(name);
  if (!any) throw file_error(path, "nothing to check: no 'out', 'lse' or stage intermediate (docs/check.md lists the names)");

  // The arithmetic: declared, or read off the stored tensors.
  const HostTensor* out_t = g.find("out");
  const HostTensor* probs_t = g.find("probs");
  const HostTensor* scores_t = g.find("scores");
  const HostTensor* lse_t = g.find("lse");
  const DType output = spec.output.value_or(out_t ? out_t->dtype() : input);
  const DType probs = spec.probs.value_or(probs_t ? probs_t->dtype() : input);
  const DType score_format = spec.scores.value_or(scores_t ? scores_t->dtype() : DType::f32);
  check_holds(path, "out", out_t, output, "outputs");
  check_holds(path, "probs", probs_t, probs, "probabilities");
  check_holds(path, "scores", scores_t, score_format, "scores");
  ChainArithmetic& a = g.graph.arithmetic;
  a = nominal_arithmetic(input);
  a.qk.out = score_format;
  a.softmax.out = probs;
  a.pv.operand = probs;
  a.pv.out = split ? DType::f32 : output;  // split: the accumulator of each split
  a.qk.accumulate = a.pv.accumulate = spec.accumulate.value_or(DType::f32);
  a.qk.tensor_cores = a.pv.tensor_cores = spec.tensor_cores.value_or(input != DType::f32);
  a.lse.out = lse_t ? lse_t->dtype() : split ? partial_lse->dtype() : DType::f32;
  if (split) {
    a.normalize.out = partial_out->dtype();
    a.combine.out = output;
    g.graph.algorithm = {Algorithm::Kind::split, capture.tile_width, splits};
    for (int t = 0; t < static_cast<int>(splits); ++t) g.split_stage(t);
    g.stage(StageKind::combine, -1, {{"out", Quantity::output, ""}});
  } else {
    g.stage(StageKind::qk, -1, {{"scores", Quantity::scores, ""}});
    g.stage(StageKind::softmax, -1,
            {{"probs", Quantity::probs, ""}, {"row_max", Quantity::row_max, "max"}, {"row_sum", Quantity::row_sum, "sum"}});
    g.stage(StageKind::pv, -1, {{"out", Quantity::output, ""}});
  }
  g.stage(StageKind::lse, -1, {{"lse", Quantity::lse, ""}});

  const std::string name = capture.impl.empty() ? "captured" : capture.impl;
  return std::make_unique<Captured>(name, path, std::move(g.graph), std::move(g.slots));
}

}  // namespace fc

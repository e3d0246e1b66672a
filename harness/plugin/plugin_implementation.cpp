#include "harness/plugin/plugin_implementation.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/error.h"
#include "harness/plugin/crash_guard.h"
#include "kernels/common/device_inputs.h"

namespace fc {
namespace {

constexpr std::size_t kErrorSize = 1024;

// The harness's side of every callback: no exception may cross into the plugin, so each
// catches, keeps the first message and returns FC_FAILED.
struct CallbackState {
  std::string error;
  template <class F>
  int run(F&& f) noexcept {
    try {
      f();
      return FC_OK;
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    } catch (...) {
      if (error.empty()) error = "unknown error";
    }
    return FC_FAILED;
  }
};

struct GraphState : CallbackState {
  StageGraph graph;
};

StageKind stage_kind(std::int32_t kind) {
  if (kind < FC_STAGE_QK || kind > FC_STAGE_COMBINE) throw Error("unknown stage kind " + std::to_string(kind));
  return static_cast<StageKind>(kind);  // the same order as stages/stage.h
}

Quantity quantity(std::int32_t q) {
  if (q < FC_QUANTITY_SCORES || q > FC_QUANTITY_LSE) throw Error("unknown quantity " + std::to_string(q));
  return static_cast<Quantity>(q);  // the same order as stages/stage.h
}

int set_algorithm(void* handle, std::int32_t kind, std::int64_t tile_width, std::int64_t splits) {
  auto* s = static_cast<GraphState*>(handle);
  return s->run([&] {
    Algorithm& a = s->graph.algorithm;
    switch (kind) {
      case FC_ALGORITHM_FULL: a = {Algorithm::Kind::full, 0, 0}; return;
      case FC_ALGORITHM_BLOCKED:
        if (tile_width < 1) throw Error("set_algorithm: a blocked algorithm needs tile_width >= 1");
        a = {Algorithm::Kind::blocked, tile_width, 0};
        return;
      case FC_ALGORITHM_SPLIT:
        if (tile_width < 1 || splits < 1) throw Error("set_algorithm: a split algorithm needs tile_width and splits >= 1");
        a = {Algorithm::Kind::split, tile_width, splits};
        return;
    }
    throw Error("set_algorithm: unknown algorithm " + std::to_string(kind));
  });
}

int set_arithmetic(void* handle, std::int32_t kind, const fc_arithmetic* arithmetic) {
  auto* s = static_cast<GraphState*>(handle);
  return s->run([&] {
    if (!arithmetic) throw Error("set_arithmetic: NULL arithmetic");
    Arithmetic& a = arithmetic_of(s->graph.arithmetic, stage_kind(kind));
    a.out = plugin_dtype(arithmetic->out);
    a.operand = plugin_dtype(arithmetic->operand);
    a.accumulate = plugin_dtype(arithmetic->accumulate);
    if (a.accumulate == DType::bf16) throw Error("set_arithmetic: a bf16 accumulator is not modelled");
    a.tensor_cores = arithmetic->tensor_cores != 0;
  });
}

int add_stage(void* handle, const fc_stage* stage) {
  auto* s = static_cast<GraphState*>(handle);
  return s->run([&] {
    if (!stage) throw Error("add_stage: NULL stage");
    if (stage->output_count < 1 || stage->output_count > FC_MAX_STAGE_OUTPUTS) {
      throw Error("add_stage: output_count must be 1 to " + std::to_string(FC_MAX_STAGE_OUTPUTS));
    }
    Stage st{stage_kind(stage->kind), stage->split, stage->tile, {}, stage->reads_own_output != 0};
    for (std::uint32_t i = 0; i < stage->output_count; ++i) {
      const fc_stage_output& o = stage->outputs[i];
      const double value_scale = o.value_scale == 0 ? 1.0 : o.value_scale;
      if (!std::isfinite(value_scale)) throw Error("add_stage: value_scale must be finite");
      st.outputs.push_back({o.name ? o.name : "", quantity(o.quantity), plugin_dtype(o.dtype), value_scale});
    }
    s->graph.stages.push_back(std::move(st));
  });
}

struct WorkspaceState : CallbackState {
  Workspace* workspace = nullptr;
  std::vector<const Buffer*>* buffers = nullptr;
};

int allocate(void* handle, const char* name, std::int32_t dtype, std::int64_t count, void** data) {
  auto* s = static_cast<WorkspaceState*>(handle);
  return s->run([&] {
    if (!data) throw Error("allocate: NULL data");
    if (count < 1) throw Error("allocate: count must be at least 1");
    const Buffer& b = s->workspace->allocate(name && *name ? name : "plugin buffer", plugin_dtype(dtype), count);
    s->buffers->push_back(&b);
    *data = b.data;
  });
}

struct TapState : CallbackState {
  Tap* tap = nullptr;
  const std::vector<const Buffer*>* buffers = nullptr;
  bool on_device = false;
};

// The workspace buffer a view's data points into, or null: none of ours (the plugin's own memory).
const Buffer* buffer_of(const std::vector<const Buffer*>& buffers, const void* data) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (const Buffer* b : buffers) {
    const auto* begin = static_cast<const std::uint8_t*>(b->data);
    if (p >= begin && p < begin + b->count * static_cast<std::int64_t>(dtype_size(b->dtype))) return b;
  }
  return nullptr;
}

// A view's strides as the capture reads them: a dense permutation of its dims (the elements
// fill numel consecutive slots, each dim of more than one element stepping by the product of
// the dims inside it). A dim of one element has no step that matters: it is placed outermost.
// Anything else (gaps, overlaps, a zero or negative step) is refused, naming the strides.
Dims dense_strides(const Dims& dims, const std::int64_t* strides, int rank) {
  std::vector<int> order;
  for (int d = 0; d < rank; ++d) {
    if (dims[static_cast<std::size_t>(d)] > 1) order.push_back(d);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return strides[a] < strides[b]; });
  std::int64_t expected = 1;
  for (int d : order) {
    if (strides[d] != expected) {
      throw Error("tap: strides " + dims_string(Dims(strides, strides + rank)) + " are not a dense permutation of dims " +
                  dims_string(dims) + " (each dim of more than one element must step by the product of the dims inside it)");
    }
    expected *= dims[static_cast<std::size_t>(d)];
  }
  Dims out(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d) out[static_cast<std::size_t>(d)] = dims[static_cast<std::size_t>(d)] > 1 ? strides[d] : expected;
  return out;
}

int capture(void* handle, std::uint32_t stage, std::uint32_t output, const fc_tensor_view* view) {
  auto* s = static_cast<TapState*>(handle);
  return s->run([&] {
    if (!view || !view->data) throw Error("tap: a view without data");
    if (view->rank != 3 && view->rank != 4) throw Error("tap: rank must be 3 or 4");
    TensorView v;
    v.data = view->data;
    v.dtype = plugin_dtype(view->dtype);
    v.dims.assign(view->dims, view->dims + view->rank);
    for (const std::int64_t d : v.dims) {
      if (d < 0) throw Error("tap: a dim of " + std::to_string(d));
    }
    bool strided = false;
    for (int i = 0; i < view->rank; ++i) strided = strided || view->strides[i] != 0;
    if (strided) v.strides = dense_strides(v.dims, view->strides, view->rank);
    v.on_device = s->on_device;
    // The view's elements must lie inside the buffer it starts in (they are read from there).
    const Buffer* buffer = buffer_of(*s->buffers, view->data);
    if (buffer) {
      const std::int64_t element = static_cast<std::int64_t>(dtype_size(v.dtype));
      const auto* begin = static_cast<const std::uint8_t*>(buffer->data);
      const auto* first = static_cast<const std::uint8_t*>(view->data);
      const std::int64_t room = buffer->count * static_cast<std::int64_t>(dtype_size(buffer->dtype)) - (first - begin);
      if (v.numel() * element > room) {
        throw Error("tap: the view of " + std::to_string(v.numel()) + " elements runs past the end of buffer '" +
                    buffer->name + "' (" + std::to_string(room / element) + " left from its start)");
      }
    }
    v.buffer_id = buffer ? buffer->id : 0;
    s->tap->capture(stage, output, v);
  });
}

class PluginImplementation final : public Implementation {
 public:
  PluginImplementation(std::shared_ptr<const PluginLibrary> library, const fc_implementation& decl)
      : library_(std::move(library)), decl_(decl) {}

  ~PluginImplementation() override {
    if (!instance_) return;
    try {
      guarded(who(), "destroy", [&] { decl_.destroy(instance_); });
    } catch (const PluginFailure& e) {  // a destructor cannot throw it: the command ends with it
      keep_late_failure(e.what());
    }
  }

  std::string name() const override { return decl_.name; }
  std::string summary() const override {
    return std::string(decl_.summary ? decl_.summary : "") + " (plugin " + library_->path() + ")";
  }
  bool on_gpu() const override { return decl_.on_gpu != 0; }
  std::vector<std::string> faults() const override {
    std::vector<std::string> ids;
    for (std::uint32_t i = 0; i < decl_.fault_count; ++i) ids.push_back(decl_.faults[i].id);
    return ids;
  }

  std::optional<std::string> unsupported(const Problem& p) const override {
    if (const std::optional<std::string> why = outside_plugin_features(decl_.features, p)) return why;
    if (!decl_.supports) return std::nullopt;
    const fc_problem problem = plugin_problem(p);
    char why[kErrorSize] = {};
    int status = FC_OK;
    guarded(who(), "supports", [&] { status = decl_.supports(instance(), &problem, why, sizeof why); });
    if (status == FC_OK) return std::nullopt;
    return why[0] ? std::string(why) : std::string("the plugin declines this case");
  }

  StageGraph stage_graph(const Problem& p) const override {
    const fc_problem problem = plugin_problem(p);
    GraphState state;
    state.graph.arithmetic = nominal_arithmetic(p.dtype);
    const fc_graph_builder builder{&state, set_algorithm, set_arithmetic, add_stage};
    char error[kErrorSize] = {};
    int status = FC_OK;
    const std::string fault = injected();
    guarded(who(), "stage_graph", [&] {
      status = decl_.stage_graph(instance(), &problem, fault.c_str(), &builder, error, sizeof error);
    });
    fail_if(status, error, state.error, "stage_graph");
    if (state.graph.stages.empty()) throw PluginFailure(who() + ": stage_graph declared no stage");
    try {  // every stage has a place in the graph, as a snapshot's must: inside the keys
      for (const Stage& st : state.graph.stages) {
        check_stage_placement(p.shape, state.graph.algorithm, st);
        for (const StageOutput& o : st.outputs) output_dims(p.shape, state.graph.algorithm, st, o);
      }
    } catch (const Error& e) {
      throw PluginFailure(who() + ": stage_graph: " + e.what());
    }
    return state.graph;
  }

  void prepare(const Problem& p, Workspace& ws, bool traced) override {
    const fc_problem problem = plugin_problem(p);
    buffers_.clear();
    WorkspaceState state;
    state.workspace = &ws;
    state.buffers = &buffers_;
    const fc_workspace workspace{&state, allocate};
    char error[kErrorSize] = {};
    int status = FC_OK;
    guarded(who(), "prepare", [&] {
      status = decl_.prepare(instance(), &problem, traced ? 1 : 0, &workspace, error, sizeof error);
    });
    fail_if(status, error, state.error, "prepare");
  }

  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const fc_problem problem = plugin_problem(p);
    fc_run_args args{};
    args.struct_size = sizeof args;
    args.problem = &problem;
    HostTensor bias;  // a CPU implementation reads a bias as fp32, as the device mask is
    if (on_gpu()) {
      if (!ctx.device) throw Error(name() + ": no device inputs");
      args.q = ctx.device->q();
      args.k = ctx.device->k();
      args.v = ctx.device->v();
      args.key_lengths = ctx.device->mask().key_lengths;
      args.dense_mask = ctx.device->mask().dense;
      args.stream = ctx.stream;
      if (ctx.tap) FC_CUDA(cudaStreamSynchronize(ctx.stream));  // poisoned, whatever stream the plugin uses
    } else {
      args.q = ctx.inputs.q.data();
      args.k = ctx.inputs.k.data();
      args.v = ctx.inputs.v.data();
      const Mask& m = p.mask;
      args.key_lengths = m.key_lengths.empty() ? nullptr : m.key_lengths.data();
      if (m.has_dense()) {
        bias = m.dense_is_bias() ? m.dense.to(DType::f32) : m.dense;
        args.dense_mask = bias.data();
      }
    }
    TapState state;
    state.tap = ctx.tap;
    state.buffers = &buffers_;
    state.on_device = on_gpu();
    const fc_tap tap{&state, capture};
    args.tap = ctx.tap ? &tap : nullptr;
    args.trace_build = ctx.trace_build ? 1 : 0;
    const std::string fault = injected();
    args.fault = fault.c_str();
    char error[kErrorSize] = {};
    int status = FC_OK;
    guarded(who(), "run", [&] { status = decl_.run(instance(), &args, error, sizeof error); });
    fail_if(status, error, state.error, "run");
    if (on_gpu() && ctx.tap) {  // a kernel that faulted: the plugin's failure, not a finding
      const cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) {
        throw PluginFailure(who() + ": run: CUDA reported '" + cudaGetErrorString(e) + "' after its kernels");
      }
    }
  }

 private:
  std::string who() const { return library_->who() + ": " + decl_.name; }

  void* instance() const {
    if (instance_) return instance_;
    char error[kErrorSize] = {};
    guarded(who(), "create", [&] { instance_ = decl_.create(error, sizeof error); });
    if (!instance_) throw PluginFailure(who() + ": create failed" + (error[0] ? ": " + std::string(error) : ""));
    return instance_;
  }

  // A failed call: the plugin's status and message, or what the harness refused.
  void fail_if(int status, const char* error, const std::string& refused, const char* call) const {
    if (!refused.empty()) throw PluginFailure(who() + ": " + call + ": the harness refused: " + refused);
    if (status != FC_OK) {
      throw PluginFailure(who() + ": " + call + " failed" + (error[0] ? ": " + std::string(error) : ""));
    }
  }


  std::shared_ptr<const PluginLibrary> library_;
  const fc_implementation& decl_;
  mutable void* instance_ = nullptr;
  std::vector<const Buffer*> buffers_;
};

}  // namespace

std::optional<std::string> outside_plugin_features(const fc_features& f, const Problem& p) {
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) return std::string("takes fp16 or bf16 inputs");
  if ((f.dtypes & FC_DTYPE_BIT(plugin_dtype_of(p.dtype))) == 0) {
    return std::string("declares no ") + dtype_name(p.dtype) + " support";
  }
  const Mask& m = p.mask;
  const std::pair<bool, std::pair<std::uint32_t, const char*>> parts[] = {
      {m.causal == Causal::top_left, {FC_MASK_CAUSAL_TOP_LEFT, "causal"}},
      {m.causal == Causal::bottom_right, {FC_MASK_CAUSAL_BOTTOM_RIGHT, "causal-br"}},
      {!m.key_lengths.empty(), {FC_MASK_KEY_PADDING, "padding"}},
      {m.has_dense() && !m.dense_is_bias(), {FC_MASK_DENSE_BOOL, "bool"}},
      {m.dense_is_bias(), {FC_MASK_DENSE_BIAS, "bias"}},
  };
  for (const auto& [present, part] : parts) {
    if (present && (f.masks & part.first) == 0) return std::string("does not handle the mask part ") + part.second;
  }
  // What fc_problem (version 1) cannot tell the plugin: run anyway, it would compute another
  // problem and be judged against this one (a false divergence, or K/V heads read past their end).
  const std::pair<bool, const char*> unexpressed[] = {
      {m.window.active(), "a sliding window"},
      {m.has_alibi(), "ALiBi slopes"},
      {p.softcap > 0, "a softcap"},
      {p.layout.varlen(), "variable sequence lengths (varlen)"},
  };
  for (const auto& [present, what] : unexpressed) {
    if (present) return std::string("the plugin interface (version 1) cannot pass ") + what + " to a plugin";
  }
  if (p.shape.kv_head_count() != p.shape.heads && !f.gqa) {
    return std::string("declares no GQA/MQA support (fc_features.gqa), and this case has ") +
           std::to_string(p.shape.kv_head_count()) + " K/V heads for " + std::to_string(p.shape.heads) + " query heads";
  }
  const std::int64_t d = p.shape.head_dim;
  if (f.max_head_dim > 0 && d > f.max_head_dim) return "head dim " + std::to_string(d) + " above its " + std::to_string(f.max_head_dim);
  if (f.head_dim_count > 0) {
    std::string listed;
    for (std::uint32_t i = 0; i < f.head_dim_count; ++i) {
      if (f.head_dims[i] == d) return std::nullopt;
      listed += (listed.empty() ? "" : ", ") + std::to_string(f.head_dims[i]);
    }
    return "head dim " + std::to_string(d) + " is not one of " + listed;
  }
  return std::nullopt;
}

fc_problem plugin_problem(const Problem& p) {
  fc_problem f{};
  f.struct_size = sizeof f;
  f.dtype = plugin_dtype_of(p.dtype);
  f.batch = p.shape.batch;
  f.heads = p.shape.heads;
  f.kv_heads = p.shape.kv_head_count();
  f.q_len = p.shape.q_len;
  f.kv_len = p.shape.kv_len;
  f.head_dim = p.shape.head_dim;
  f.scale = p.scale;
  f.causal = p.mask.causal == Causal::top_left ? FC_CAUSAL_TOP_LEFT
             : p.mask.causal == Causal::bottom_right ? FC_CAUSAL_BOTTOM_RIGHT
                                                      : FC_CAUSAL_NONE;
  f.key_padding = p.mask.key_lengths.empty() ? 0 : 1;
  f.dense_mask = !p.mask.has_dense() ? FC_DENSE_NONE : p.mask.dense_is_bias() ? FC_DENSE_BIAS : FC_DENSE_BOOL;
  if (p.mask.has_dense()) {
    f.dense_batch = p.mask.dense.dim(0);
    f.dense_heads = p.mask.dense.dim(1);
  }
  return f;
}

std::unique_ptr<Implementation> make_plugin_implementation(std::shared_ptr<const PluginLibrary> library,
                                                           const fc_implementation& declaration) {
  return std::make_unique<PluginImplementation>(std::move(library), declaration);
}

}  // namespace fc

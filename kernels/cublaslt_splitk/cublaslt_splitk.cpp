// cublaslt-splitk: unpaged attention with cuBLASLt, each matmul's algorithm (split-K number
// included) chosen by timing and cached per shape:
//   qk       S = scale * Q K^T over all keys (fp32 scores), then the mask
//   softmax  whole rows: p in the input format, row max and sum
//   pv       O = P V in the input format
// Layouts: kernels/common/attention_gemms.h, over all Sk keys.
#include <map>
#include <memory>
#include <utility>

#include "kernels/common/attention_gemms.h"
#include "kernels/common/device_inputs.h"
#include "kernels/common/stage_graphs.h"
#include "kernels/cublaslt_paged/page_kernels.h"
#include "kernels/cublaslt_splitk/cublaslt_splitk.h"
#include "kernels/cublaslt_splitk/split_k_tuning.h"

namespace fc {
namespace {

constexpr std::int64_t kWorkspaceBytes = std::int64_t{32} << 20;

struct Gemms {
  std::unique_ptr<LtGemm> qk, pv;
};

class CublasLtSplitK final : public Implementation {
 public:
  std::string name() const override { return "cublaslt-splitk"; }
  std::string summary() const override {
    return "GPU, cuBLASLt unpaged: strided-batched Q.K^T and P.V, algorithm and split-K (1-32) chosen by timing; "
           "whole-row softmax";
  }
  bool on_gpu() const override { return true; }
  std::optional<std::string> unsupported(const Problem& p) const override { return lt_unsupported(p); }
  std::vector<std::string> faults() const override {
    return {"attr-int32", "rows-cols-swap", "fp16-scores", "no-max-subtract", "masked-row-nan"};
  }

  StageGraph stage_graph(const Problem& p) const override {
    // cuBLASLt HMMA matmuls; fp16-scores stores q.k before the scale.
    return full_stage_graph(p, {score_dtype(), faulty("fp16-scores") ? p.scale : 1.0, p.dtype, true});
  }


  std::vector<DescriptorReport> describe(const Problem& p) const override {
    const LtGemm qk(qk_config(p)), pv(pv_config(p));
    return {{0, qk.record(), lint(qk.record(), qk_lint(p)), false}, {2, pv.record(), lint(pv.record(), pv_lint(p)), false}};
  }

  void prepare(const Problem& p, Workspace& ws, bool) override {
    const Shape& s = p.shape;
    const std::int64_t rows = s.batch * s.heads * s.q_len;
    scores_ = &ws.allocate("scores", score_dtype(), rows * s.kv_len);
    probs_ = &ws.allocate("probs", p.dtype, rows * s.kv_len);
    max_ = &ws.allocate("row_max", DType::f32, rows);
    sum_ = &ws.allocate("row_sum", DType::f32, rows);
    out_ = &ws.allocate("output", p.dtype, rows * s.head_dim);
    lt_workspace_ = &ws.allocate("cublaslt_workspace", DType::u8, kWorkspaceBytes);
  }

  void tune(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    if (!handle_) handle_ = std::make_unique<LtHandle>();
    Gemms& g = gemms(p);
    const DeviceInputs& in = *ctx.device;
    const std::size_t ws = static_cast<std::size_t>(kWorkspaceBytes);
    // Each matmul on its own: cached ones keep their algorithm, one lint will stop gets none.
    if (!g.qk->has_algorithm() && lint(g.qk->record(), qk_lint(p)).empty()) {
      tune_split_k(*handle_, *g.qk, {alpha(p), 0.0f, in.k(), in.q(), scores_->data, scores_->data, lt_workspace_->data, ws},
                   ctx.stream);
    }
    if (!g.pv->has_algorithm() && lint(g.pv->record(), pv_lint(p)).empty()) {
      tune_split_k(*handle_, *g.pv, {1.0f, 0.0f, in.v(), probs_->data, out_->data, out_->data, lt_workspace_->data, ws},
                   ctx.stream);
    }
  }

  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    const DeviceInputs& in = *ctx.device;
    if (!handle_) handle_ = std::make_unique<LtHandle>();
    Gemms& g = gemms(p);
    const std::int64_t rows = s.batch * s.heads * s.q_len;
    const Dims score_dims{s.batch, s.heads, s.q_len, s.kv_len}, row_dims{s.batch, s.heads, s.q_len};

    g.qk->lint_and_run(*handle_, qk_lint(p), 0, ctx.descriptors, alpha(p), in.k(), in.q(), 0.0f, scores_->data,
                       scores_->data, lt_workspace_->data, ctx.stream);
    if (in.has_mask() || p.softcap > 0) {
      launch_apply_mask(scores_->data, score_dtype(), alpha(p) / static_cast<float>(p.scale),
                        static_cast<float>(p.softcap), s, 0, rows, 0, static_cast<int>(s.kv_len), in.mask(), ctx.stream);
    }
    // The softmax folds in the flags of the scores it reads and of what it stores (stages/tap.h).
    RowSoftmaxFlags flags;
    if (ctx.tap) {
      flags.scores = ctx.tap->fused_flags(0, 0, scores_->view(score_dims), 0, FlagAccess::reads_memory);
      ctx.tap->capture(0, 0, scores_->view(score_dims));
      flags.probs = ctx.tap->fused_flags(1, 0, probs_->view(score_dims), 0, FlagAccess::stores);
      flags.max = ctx.tap->fused_flags(1, 1, max_->view(row_dims), 0, FlagAccess::stores);
      flags.sum = ctx.tap->fused_flags(1, 2, sum_->view(row_dims), 0, FlagAccess::stores);
    }

    const ScoreInput scores{scores_->data, score_dtype(), faulty("fp16-scores") ? static_cast<float>(p.scale) : 1.0f};
    launch_row_softmax(scores, rows, static_cast<int>(s.kv_len), max_->as<float>(), sum_->as<float>(), probs_->data,
                       p.dtype, {!faulty("no-max-subtract"), !faulty("masked-row-nan")}, flags, ctx.stream);
    if (ctx.tap) {
      ctx.tap->capture(1, 0, probs_->view(score_dims));
      ctx.tap->capture(1, 1, max_->view(row_dims));
      ctx.tap->capture(1, 2, sum_->view(row_dims));
    }

    g.pv->lint_and_run(*handle_, pv_lint(p), 2, ctx.descriptors, 1.0f, in.v(), probs_->data, 0.0f, out_->data,
                       out_->data, lt_workspace_->data, ctx.stream);
    if (ctx.tap) ctx.tap->capture(2, 0, out_->view({s.batch, s.heads, s.q_len, s.head_dim}));
  }

 private:
  DType score_dtype() const { return faulty("fp16-scores") ? DType::f16 : DType::f32; }
  // fp16-scores stores q.k before the scale.
  float alpha(const Problem& p) const { return faulty("fp16-scores") ? 1.0f : static_cast<float>(p.scale); }

  GemmConfig qk_config(const Problem& p) const {
    GemmConfig c = qk_gemm(p, p.shape.kv_len, score_dtype());
    c.name = "qk";
    if (faulty("rows-cols-swap")) std::swap(c.a.rows, c.a.cols);  // K built as [Sk x D], same ld
    c.max_workspace = static_cast<std::size_t>(kWorkspaceBytes);
    c.int32_batch_attributes = faulty("attr-int32");
    return c;
  }

  GemmConfig pv_config(const Problem& p) const {
    GemmConfig c = pv_gemm(p, p.shape.kv_len, p.dtype);
    c.name = "pv";
    c.max_workspace = static_cast<std::size_t>(kWorkspaceBytes);
    c.int32_batch_attributes = faulty("attr-int32");
    return c;
  }

  LintContext qk_lint(const Problem& p) const {
    const Shape& s = p.shape;
    const std::int64_t heads = s.batch * s.heads, kv_heads = s.batch * s.kv_head_count();
    LintContext c;
    c.a = {"K", p.dtype, kv_heads * s.kv_len * s.head_dim, true};
    c.b = {"Q", p.dtype, heads * s.q_len * s.head_dim, true};
    c.c = c.d = {"scores", score_dtype(), heads * s.q_len * s.kv_len, false};
    c.next_stage_reads = score_dtype();
    return c;
  }

  LintContext pv_lint(const Problem& p) const {
    const Shape& s = p.shape;
    const std::int64_t heads = s.batch * s.heads, kv_heads = s.batch * s.kv_head_count();
    LintContext c;
    c.a = {"V", p.dtype, kv_heads * s.kv_len * s.head_dim, true};
    c.b = {"probs", p.dtype, heads * s.q_len * s.kv_len, true};
    c.c = c.d = {"output", p.dtype, heads * s.q_len * s.head_dim, false};
    c.next_stage_reads = p.dtype;
    return c;
  }

  Gemms& gemms(const Problem& p) {
    const std::string key = p.shape.to_string() + "|" + dtype_name(p.dtype) + "|" + injected();
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      Gemms g{std::make_unique<LtGemm>(qk_config(p)), std::make_unique<LtGemm>(pv_config(p))};
      it = cache_.emplace(key, std::move(g)).first;
    }
    return it->second;
  }

  std::unique_ptr<LtHandle> handle_;
  std::map<std::string, Gemms> cache_;
  Buffer *scores_ = nullptr, *probs_ = nullptr, *max_ = nullptr, *sum_ = nullptr, *out_ = nullptr;
  Buffer* lt_workspace_ = nullptr;
};

}  // namespace

std::unique_ptr<Implementation> make_cublaslt_splitk() { return std::make_unique<CublasLtSplitK>(); }

}  // namespace fc

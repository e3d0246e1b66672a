// cublaslt-paged: attention over pages of Bc keys with cuBLASLt matmuls and an online
// softmax between them. Per page j, across all B*H heads in one strided-batched call each:
//   qk[j]       S_j = scale * Q K_j^T (fp16 x fp16, fp32 compute, fp32 scores), then the mask
//   softmax[j]  p~_j = exp(S_j - m_j) in fp16, running max m and sum l, rescale r_j
//   rescale[j]  O *= r_j (pages after the first)
//   pv[j]       O = P~_j V_j + beta O, beta = 0 on the first page, 1 after
// and at the end normalize: O / l in the input format.
//
// Layouts: kernels/common/attention_gemms.h, over the page's n keys.
// Faults (docs/faults.md) live here, beside the code they break.
#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "core/error.h"
#include "kernels/common/attention_gemms.h"
#include "kernels/common/device_inputs.h"
#include "kernels/common/lt_gemm.h"
#include "kernels/common/stage_graphs.h"
#include "kernels/cublaslt_paged/cublaslt_paged.h"
#include "kernels/cublaslt_paged/page_kernels.h"

namespace fc {
namespace {

constexpr std::int64_t kDefaultPageWidth = 128;

class CublasLtPaged final : public Implementation {
 public:
  explicit CublasLtPaged(std::int64_t page_width) : page_width_(page_width) {}

  std::string name() const override { return "cublaslt-paged"; }
  std::string summary() const override {
    return "GPU, cuBLASLt per page of " + std::to_string(page_width_) +
           " keys: strided-batched Q.K^T (fp32 scores), online softmax, rescale, P~.V accumulated (beta 0 then 1), "
           "normalize";
  }
  bool on_gpu() const override { return true; }
  std::optional<std::string> unsupported(const Problem& p) const override { return lt_unsupported(p); }
  std::vector<std::string> faults() const override {
    return {"first-page-rescale", "beta-first-page", "stale-scores", "attr-int32", "rows-cols-swap",
            "fp16-scores",        "no-max-subtract", "masked-row-nan", "tail-page"};
  }

  StageGraph stage_graph(const Problem& p) const override {
    PagedGraph o;
    o.page_width = page_width_;
    o.scores = score_dtype(p);
    o.score_scale = faulty("fp16-scores") ? p.scale : 1.0;  // q.k stored before the scale
    o.tensor_cores = true;                                  // cuBLASLt HMMA matmuls
    o.rescale_first_page = faulty("first-page-rescale");
    o.accumulate_first_page = faulty("beta-first-page");
    return paged_stage_graph(p, o);
  }


  std::vector<DescriptorReport> describe(const Problem& p) const override {
    std::vector<DescriptorReport> reports;
    const std::vector<PageStages> stages = page_stages(stage_graph(p));
    const std::int64_t pages = static_cast<std::int64_t>(stages.size());
    for (std::int64_t j : {std::int64_t{0}, pages - 1}) {
      const std::int64_t n = page_cols(p, j);
      const LtGemm qk(qk_config(p, n)), pv(pv_config(p, n));
      reports.push_back({stages[static_cast<std::size_t>(j)].qk, qk.record(), lint(qk.record(), qk_lint(p, j)), false});
      reports.push_back({stages[static_cast<std::size_t>(j)].pv, pv.record(), lint(pv.record(), pv_lint(p, j)), false});
      if (pages == 1) break;
    }
    return reports;
  }

  void prepare(const Problem& p, Workspace& ws, bool) override {
    const Shape& s = p.shape;
    const std::int64_t rows = s.batch * s.heads * s.q_len;
    scores_ = &ws.allocate("scores_page", score_dtype(p), rows * page_width_);
    p_tilde_ = &ws.allocate("p_tilde_page", p.dtype, rows * page_width_);
    max_ = &ws.allocate("row_max", DType::f32, rows);
    sum_ = &ws.allocate("row_sum", DType::f32, rows);
    rescale_ = &ws.allocate("rescale", DType::f32, rows);
    acc_ = &ws.allocate("acc", DType::f32, rows * s.head_dim);
    out_ = &ws.allocate("output", p.dtype, rows * s.head_dim);
    lt_workspace_ = &ws.allocate("cublaslt_workspace", DType::u8, std::int64_t{32} << 20);
  }

  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    const DeviceInputs& in = *ctx.device;
    if (!handle_) handle_ = std::make_unique<LtHandle>();
    const StageGraph graph = stage_graph(p);
    const std::vector<PageStages> stages = page_stages(graph);
    const std::int64_t rows = s.batch * s.heads * s.q_len;
    const Dims row_dims{s.batch, s.heads, s.q_len}, acc_dims{s.batch, s.heads, s.q_len, s.head_dim};
    const std::size_t dsize = dtype_size(p.dtype);

    for (std::size_t j = 0; j < stages.size(); ++j) {
      const PageStages& st = stages[j];
      const std::int64_t j0 = static_cast<std::int64_t>(j) * page_width_, n = page_cols(p, static_cast<std::int64_t>(j));
      const Dims page_dims{s.batch, s.heads, s.q_len, n};

      // stale-scores: the second page's Q.K^T is never computed; its scores are the first page's.
      if (!(faulty("stale-scores") && j == 1)) {
        const float alpha = faulty("fp16-scores") ? 1.0f : static_cast<float>(p.scale);
        gemm(p, "qk", n).lint_and_run(*handle_, qk_lint(p, static_cast<std::int64_t>(j)), st.qk, ctx.descriptors, alpha,
                                      static_cast<const std::uint8_t*>(in.k()) + j0 * s.head_dim * dsize, in.q(), 0.0f,
                                      scores_->data, scores_->data, lt_workspace_->data, ctx.stream);
        if (in.has_mask() || p.softcap > 0) {
          launch_apply_mask(scores_->data, score_dtype(p), alpha / static_cast<float>(p.scale),
                            static_cast<float>(p.softcap), s, static_cast<int>(j0), static_cast<int>(n), in.mask(),
                            ctx.stream);
        }
      }
      if (ctx.tap) ctx.tap->capture(st.qk, 0, scores_->view(page_dims));

      const ScoreInput scores{scores_->data, score_dtype(p), faulty("fp16-scores") ? static_cast<float>(p.scale) : 1.0f};
      launch_online_softmax(scores, rows, static_cast<int>(n), j == 0, max_->as<float>(), sum_->as<float>(),
                            rescale_->as<float>(), p_tilde_->data, p.dtype, softmax_options(), ctx.stream);
      if (ctx.tap) {
        ctx.tap->capture(st.softmax, 0, p_tilde_->view(page_dims));
        ctx.tap->capture(st.softmax, 1, max_->view(row_dims));
        ctx.tap->capture(st.softmax, 2, sum_->view(row_dims));
      }

      if (st.has_rescale) {
        launch_rescale_rows(acc_->as<float>(), rescale_->as<float>(), rows, static_cast<int>(s.head_dim), ctx.stream);
        if (ctx.tap) ctx.tap->capture(st.rescale, 0, acc_->view(acc_dims));
      }

      const float beta = graph.stages[st.pv].reads_own_output ? 1.0f : 0.0f;  // beta-first-page: page 0 too
      gemm(p, "pv", n).lint_and_run(*handle_, pv_lint(p, static_cast<std::int64_t>(j)), st.pv, ctx.descriptors, 1.0f,
                                    static_cast<const std::uint8_t*>(in.v()) + j0 * s.head_dim * dsize, p_tilde_->data,
                                    beta, acc_->data, acc_->data, lt_workspace_->data, ctx.stream);
      if (ctx.tap) ctx.tap->capture(st.pv, 0, acc_->view(acc_dims));
    }
    launch_normalize_rows(acc_->as<float>(), sum_->as<float>(), rows, static_cast<int>(s.head_dim), out_->data, p.dtype,
                          ctx.stream);
    if (ctx.tap) ctx.tap->capture(graph.stages.size() - 1, 0, out_->view(acc_dims));
  }

 private:
  DType score_dtype(const Problem&) const { return faulty("fp16-scores") ? DType::f16 : DType::f32; }

  // Keys in page j; tail-page reads the last partial page as a full one.
  std::int64_t page_cols(const Problem& p, std::int64_t j) const {
    const std::int64_t n = std::min(page_width_, p.shape.kv_len - j * page_width_);
    return faulty("tail-page") ? page_width_ : n;
  }

  GemmConfig qk_config(const Problem& p, std::int64_t n) const {
    GemmConfig c = qk_gemm(p, n, score_dtype(p));
    c.name = "qk (" + std::to_string(n) + " keys)";
    if (faulty("rows-cols-swap")) std::swap(c.a.rows, c.a.cols);  // K_j built as [n x D], same ld
    c.int32_batch_attributes = faulty("attr-int32");
    return c;
  }

  GemmConfig pv_config(const Problem& p, std::int64_t n) const {
    GemmConfig c = pv_gemm(p, n, DType::f32);  // into the running fp32 accumulator
    c.name = "pv (" + std::to_string(n) + " keys)";
    c.int32_batch_attributes = faulty("attr-int32");
    return c;
  }

  // What the harness allocated, as the lint sees it from each call's base pointer.
  LintContext qk_lint(const Problem& p, std::int64_t j) const {
    const Shape& s = p.shape;
    const std::int64_t heads = s.batch * s.heads, kv_heads = s.batch * s.kv_head_count();
    LintContext c;
    c.a = {"K from page start", p.dtype, kv_heads * s.kv_len * s.head_dim - j * page_width_ * s.head_dim, true};
    c.b = {"Q", p.dtype, heads * s.q_len * s.head_dim, true};
    c.c = c.d = {"scores_page", score_dtype(p), heads * s.q_len * page_width_, false};
    c.next_stage_reads = score_dtype(p);
    c.beta = 0;
    return c;
  }

  LintContext pv_lint(const Problem& p, std::int64_t j) const {
    const Shape& s = p.shape;
    const std::int64_t heads = s.batch * s.heads, kv_heads = s.batch * s.kv_head_count();
    LintContext c;
    c.a = {"V from page start", p.dtype, kv_heads * s.kv_len * s.head_dim - j * page_width_ * s.head_dim, true};
    c.b = {"p_tilde_page", p.dtype, heads * s.q_len * page_width_, true};
    c.c = c.d = {"acc", DType::f32, heads * s.q_len * s.head_dim, j > 0};
    c.next_stage_reads = DType::f32;
    c.beta = j > 0 || faulty("beta-first-page") ? 1.0 : 0.0;
    return c;
  }

  // The matmul of one kind and page width, built and given its algorithm once per shape.
  const LtGemm& gemm(const Problem& p, const std::string& kind, std::int64_t n) {
    const std::string key = kind + "|" + p.shape.to_string() + "|" + dtype_name(p.dtype) + "|" + std::to_string(n) +
                            "|" + injected();
    auto it = gemms_.find(key);
    if (it == gemms_.end()) {
      auto g = std::make_unique<LtGemm>(kind == "qk" ? qk_config(p, n) : pv_config(p, n));
      try {
        g->choose_by_heuristic(*handle_);
      } catch (const Error&) {
        // A broken descriptor (a fault) may have no algorithm: lint says why before launch.
      }
      it = gemms_.emplace(key, std::move(g)).first;
    }
    return *it->second;
  }

  SoftmaxOptions softmax_options() const { return {!faulty("no-max-subtract"), !faulty("masked-row-nan")}; }

  std::int64_t page_width_;
  std::unique_ptr<LtHandle> handle_;
  std::map<std::string, std::unique_ptr<LtGemm>> gemms_;
  Buffer *scores_ = nullptr, *p_tilde_ = nullptr, *max_ = nullptr, *sum_ = nullptr, *rescale_ = nullptr;
  Buffer *acc_ = nullptr, *out_ = nullptr, *lt_workspace_ = nullptr;
};

}  // namespace

std::unique_ptr<Implementation> make_cublaslt_paged() { return std::make_unique<CublasLtPaged>(kDefaultPageWidth); }

}  // namespace fc

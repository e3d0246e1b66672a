// cublaslt-paged: attention over pages of Bc keys with cuBLASLt matmuls and an online
// softmax between them. Per page j, across the heads of a group in one strided-batched call each:
//   qk[j]       S_j = scale * Q K_j^T (fp16 x fp16, fp32 compute, fp32 scores), then the mask
//   softmax[j]  p~_j = exp(S_j - m_j) in fp16, running max m and sum l, rescale r_j
//   rescale[j]  O *= r_j (pages after the first), in the softmax's pass
//   pv[j]       O = P~_j V_j + beta O, beta = 0 on the first page, 1 after
// and at the end normalize: O / l in the input format.
//
// Schedule: the B*Hkv K/V heads go in groups, all pages of one group before the next; one
// group by default, bounded groups when PagedSchedule says so (the page buffers then hold a
// group's rows). Every stage output reaches the tap in blocks of rows, a group's at a time
// (stages/tap.h, capture_rows). Why one group of pages of 128 keys: docs/cublaslt-paged.md
// (the memory floor of this design, and the schedules measured: wider pages, groups sized to
// the L2, recorded as CUDA graphs, side by side).
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
#include "stages/device_kernels.h"

namespace fc {
namespace {

class CublasLtPaged final : public Implementation {
 public:
  explicit CublasLtPaged(PagedSchedule schedule) : schedule_(schedule), page_width_(schedule.page_width) {}

  std::string name() const override { return "cublaslt-paged"; }
  std::string summary() const override {
    return "GPU, cuBLASLt per page of " + std::to_string(page_width_) +
           " keys: strided-batched Q.K^T (fp32 scores), online softmax, rescale, P~.V accumulated (beta 0 then 1), "
           "normalize";
  }
  bool on_gpu() const override { return true; }
  std::optional<std::string> unsupported(const Problem& p) const override {
    if (page_width_ > kMaxOnlineSoftmaxCols) {
      return "pages of " + std::to_string(page_width_) + " keys: the online softmax holds at most " +
             std::to_string(kMaxOnlineSoftmaxCols);
    }
    return lt_unsupported(p);
  }
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
    const std::int64_t entries = group_entries(p);
    for (std::int64_t j : {std::int64_t{0}, pages - 1}) {
      const std::int64_t n = page_cols(p, j);
      const LtGemm qk(qk_config(p, n, entries)), pv(pv_config(p, n, entries));
      reports.push_back(
          {stages[static_cast<std::size_t>(j)].qk, qk.record(), lint(qk.record(), qk_lint(p, j, 0)), false});
      reports.push_back(
          {stages[static_cast<std::size_t>(j)].pv, pv.record(), lint(pv.record(), pv_lint(p, j, 0)), false});
      if (pages == 1) break;
    }
    return reports;
  }

  void prepare(const Problem& p, Workspace& ws, bool) override {
    const Shape& s = p.shape;
    const std::int64_t rows = group_entries(p) * s.group() * s.q_len;  // a group's
    scores_ = &ws.allocate("scores_page", score_dtype(p), rows * page_width_);
    p_tilde_ = &ws.allocate("p_tilde_page", p.dtype, rows * page_width_);
    max_ = &ws.allocate("row_max", DType::f32, rows);
    sum_ = &ws.allocate("row_sum", DType::f32, rows);
    rescale_ = &ws.allocate("rescale", DType::f32, rows);
    acc_ = &ws.allocate("acc", DType::f32, rows * s.head_dim);
    out_ = &ws.allocate("output", p.dtype, s.batch * s.heads * s.q_len * s.head_dim);
    lt_workspace_ = &ws.allocate("cublaslt_workspace", DType::u8, std::int64_t{32} << 20);
  }

  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    if (!handle_) handle_ = std::make_unique<LtHandle>();
    const std::int64_t entries = s.batch * s.kv_head_count(), per_group = group_entries(p);
    for (std::int64_t e0 = 0; e0 < entries; e0 += per_group) {
      run_group(ctx, e0, std::min(per_group, entries - e0));
    }
  }

 private:
  // K/V heads e0 .. e0 + count - 1 (over B*Hkv), every page, then their normalize.
  void run_group(RunContext& ctx, std::int64_t e0, std::int64_t count) {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    const DeviceInputs& in = *ctx.device;
    const StageGraph graph = stage_graph(p);
    const std::vector<PageStages> stages = page_stages(graph);
    const std::int64_t entry_rows = s.group() * s.q_len, row0 = e0 * entry_rows, rows = count * entry_rows;
    const std::size_t dsize = dtype_size(p.dtype);
    const auto* k_group = static_cast<const std::uint8_t*>(in.k()) + e0 * s.kv_len * s.head_dim * dsize;
    const auto* v_group = static_cast<const std::uint8_t*>(in.v()) + e0 * s.kv_len * s.head_dim * dsize;
    const auto* q_group = static_cast<const std::uint8_t*>(in.q()) + row0 * s.head_dim * dsize;
    const TensorView acc = acc_->view({rows, s.head_dim}), max = max_->view({rows}), sum = sum_->view({rows});
    // The first group's calls stand for all in the descriptor reports; a later group's call is
    // reported too where its lint finds what the first group's did not (the lint runs on each).
    std::vector<DescriptorReport> later;
    std::vector<DescriptorReport>* descriptors = e0 == 0 || !ctx.descriptors ? ctx.descriptors : &later;
    struct ReportFindings {
      std::vector<DescriptorReport>& later;
      std::vector<DescriptorReport>* all;
      ~ReportFindings() {
        for (DescriptorReport& r : later) {
          if (!r.findings.empty()) all->push_back(std::move(r));
        }
      }
    } report_findings{later, ctx.descriptors};
    Tap* tap = ctx.tap;
    if (ctx.traced() && e0 > 0) {
      // A traced run sees each group's buffers as the first does: poisoned, not the last group's.
      for (const Buffer* b : {scores_, p_tilde_, max_, sum_, acc_}) launch_poison_fill(b->data, b->dtype, b->count, b->id, ctx.stream);
    }
    // A slot for a kernel below to fold a capture's flags into (stages/tap.h).
    auto fused = [&](std::size_t stage, std::size_t output, const TensorView& view, FlagAccess access) {
      return tap ? tap->fused_flags(stage, output, view, row0, access) : FlagSlot{};
    };
    auto capture = [&](std::size_t stage, std::size_t output, const TensorView& view) {
      if (tap) tap->capture_rows(stage, output, view, row0);
    };
    FlagSlot last_pv;  // the last P~.V's accumulator, flagged by the pass that reads it next

    for (std::size_t j = 0; j < stages.size(); ++j) {
      const PageStages& st = stages[j];
      const std::int64_t j0 = static_cast<std::int64_t>(j) * page_width_, n = page_cols(p, static_cast<std::int64_t>(j));
      const TensorView scores_view = scores_->view({rows, n}), p_view = p_tilde_->view({rows, n});

      // stale-scores: the second page's Q.K^T is never computed; its scores are the first page's.
      if (!(faulty("stale-scores") && j == 1)) {
        const float alpha = faulty("fp16-scores") ? 1.0f : static_cast<float>(p.scale);
        gemm(p, "qk", n, count).lint_and_run(*handle_, qk_lint(p, static_cast<std::int64_t>(j), e0), st.qk, descriptors,
                                             alpha, k_group + j0 * s.head_dim * dsize, q_group, 0.0f, scores_->data,
                                             scores_->data, lt_workspace_->data, ctx.stream);
        if (in.has_mask() || p.softcap > 0) {
          launch_apply_mask(scores_->data, score_dtype(p), alpha / static_cast<float>(p.scale),
                            static_cast<float>(p.softcap), s, row0, rows, static_cast<int>(j0), static_cast<int>(n),
                            in.mask(), ctx.stream);
        }
      }
      // One pass: the online softmax, and the accumulator's rescale (pages after the first).
      OnlineSoftmaxFlags flags;
      flags.scores = fused(st.qk, 0, scores_view, FlagAccess::reads_memory);
      capture(st.qk, 0, scores_view);
      flags.p_tilde = fused(st.softmax, 0, p_view, FlagAccess::stores);
      flags.max = fused(st.softmax, 1, max, FlagAccess::stores);
      flags.sum = fused(st.softmax, 2, sum, FlagAccess::stores);
      Rescale rescale;
      if (st.has_rescale) {
        rescale = {acc_->as<float>(), static_cast<int>(s.head_dim)};
        flags.acc_before = last_pv;
        flags.acc_after = fused(st.rescale, 0, acc, FlagAccess::stores);
      }
      const ScoreInput scores{scores_->data, score_dtype(p), faulty("fp16-scores") ? static_cast<float>(p.scale) : 1.0f};
      launch_online_softmax(scores, rows, static_cast<int>(n), j == 0, max_->as<float>(), sum_->as<float>(),
                            rescale_->as<float>(), p_tilde_->data, p.dtype, softmax_options(), rescale, flags,
                            ctx.stream);
      capture(st.softmax, 0, p_view);
      capture(st.softmax, 1, max);
      capture(st.softmax, 2, sum);
      if (st.has_rescale) capture(st.rescale, 0, acc);

      const float beta = graph.stages[st.pv].reads_own_output ? 1.0f : 0.0f;  // beta-first-page: page 0 too
      gemm(p, "pv", n, count).lint_and_run(*handle_, pv_lint(p, static_cast<std::int64_t>(j), e0), st.pv, descriptors,
                                           1.0f, v_group + j0 * s.head_dim * dsize, p_tilde_->data, beta, acc_->data,
                                           acc_->data, lt_workspace_->data, ctx.stream);
      last_pv = fused(st.pv, 0, acc, FlagAccess::reads_memory);
      capture(st.pv, 0, acc);
    }
    const std::size_t normalize = graph.stages.size() - 1;
    const TensorView out = out_->view_at(row0 * s.head_dim, {rows, s.head_dim});
    const NormalizeFlags flags{last_pv, fused(normalize, 0, out, FlagAccess::stores)};
    launch_normalize_rows(acc_->as<float>(), sum_->as<float>(), rows, static_cast<int>(s.head_dim),
                          static_cast<std::uint8_t*>(out_->data) + row0 * s.head_dim * dsize, p.dtype, flags,
                          ctx.stream);
    capture(normalize, 0, out);
  }

  // K/V heads per group: all of them, unless the schedule bounds a group's rows.
  std::int64_t group_entries(const Problem& p) const {
    const Shape& s = p.shape;
    const std::int64_t entries = s.batch * s.kv_head_count(), entry_rows = s.group() * s.q_len;
    if (schedule_.max_group_rows <= 0) return entries;
    return std::clamp<std::int64_t>(schedule_.max_group_rows / entry_rows, 1, entries);
  }

  DType score_dtype(const Problem&) const { return faulty("fp16-scores") ? DType::f16 : DType::f32; }

  // Keys in page j; tail-page reads the last partial page as a full one.
  std::int64_t page_cols(const Problem& p, std::int64_t j) const {
    const std::int64_t n = std::min(page_width_, p.shape.kv_len - j * page_width_);
    return faulty("tail-page") ? page_width_ : n;
  }

  // Over `entries` K/V heads (a group) at a time.
  GemmConfig qk_config(const Problem& p, std::int64_t n, std::int64_t entries) const {
    GemmConfig c = qk_gemm(p, n, score_dtype(p));
    c.a.batch = c.b.batch = c.c.batch = entries;
    c.name = "qk (" + std::to_string(n) + " keys)";
    if (faulty("rows-cols-swap")) std::swap(c.a.rows, c.a.cols);  // K_j built as [n x D], same ld
    c.int32_batch_attributes = faulty("attr-int32");
    return c;
  }

  GemmConfig pv_config(const Problem& p, std::int64_t n, std::int64_t entries) const {
    GemmConfig c = pv_gemm(p, n, DType::f32);  // into the running fp32 accumulator
    c.a.batch = c.b.batch = c.c.batch = entries;
    c.name = "pv (" + std::to_string(n) + " keys)";
    c.int32_batch_attributes = faulty("attr-int32");
    return c;
  }

  // What the harness allocated, as the lint sees it from each call's base pointer: K and V
  // from the group's first K/V head and the page's first key, Q from the group's first row,
  // the page buffers a group's rows long.
  LintContext qk_lint(const Problem& p, std::int64_t j, std::int64_t e0) const {
    const Shape& s = p.shape;
    const std::int64_t rows = s.batch * s.heads * s.q_len, kv_heads = s.batch * s.kv_head_count();
    const std::int64_t entry_rows = s.group() * s.q_len, group_rows = group_entries(p) * entry_rows;
    LintContext c;
    c.a = {"K from group and page start", p.dtype, (kv_heads - e0) * s.kv_len * s.head_dim - j * page_width_ * s.head_dim,
           true};
    c.b = {"Q from group start", p.dtype, (rows - e0 * entry_rows) * s.head_dim, true};
    c.c = c.d = {"scores_page", score_dtype(p), group_rows * page_width_, false};
    c.next_stage_reads = score_dtype(p);
    c.beta = 0;
    return c;
  }

  LintContext pv_lint(const Problem& p, std::int64_t j, std::int64_t e0) const {
    const Shape& s = p.shape;
    const std::int64_t kv_heads = s.batch * s.kv_head_count();
    const std::int64_t group_rows = group_entries(p) * s.group() * s.q_len;
    LintContext c;
    c.a = {"V from group and page start", p.dtype, (kv_heads - e0) * s.kv_len * s.head_dim - j * page_width_ * s.head_dim,
           true};
    c.b = {"p_tilde_page", p.dtype, group_rows * page_width_, true};
    c.c = c.d = {"acc", DType::f32, group_rows * s.head_dim, j > 0};
    c.next_stage_reads = DType::f32;
    c.beta = j > 0 || faulty("beta-first-page") ? 1.0 : 0.0;
    return c;
  }

  // The matmul of one kind, page width and group size, built and given its algorithm once.
  const LtGemm& gemm(const Problem& p, const std::string& kind, std::int64_t n, std::int64_t entries) {
    const std::string key = kind + "|" + p.shape.to_string() + "|" + dtype_name(p.dtype) + "|" + std::to_string(n) +
                            "|" + std::to_string(entries) + "|" + injected();
    auto it = gemms_.find(key);
    if (it == gemms_.end()) {
      auto g = std::make_unique<LtGemm>(kind == "qk" ? qk_config(p, n, entries) : pv_config(p, n, entries));
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

  PagedSchedule schedule_;
  std::int64_t page_width_;
  std::unique_ptr<LtHandle> handle_;
  std::map<std::string, std::unique_ptr<LtGemm>> gemms_;
  Buffer *scores_ = nullptr, *p_tilde_ = nullptr, *max_ = nullptr, *sum_ = nullptr, *rescale_ = nullptr;
  Buffer *acc_ = nullptr, *out_ = nullptr, *lt_workspace_ = nullptr;
};

}  // namespace

std::unique_ptr<Implementation> make_cublaslt_paged(PagedSchedule schedule) {
  return std::make_unique<CublasLtPaged>(schedule);
}

}  // namespace fc

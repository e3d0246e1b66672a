// cpu-emulated-paged: online softmax over pages of keys on the CPU, staged as the cuBLASLt
// paged implementation is: per page qk, softmax (p~ in the input format, running max and
// sum), rescale of the fp32 accumulator, p~ V accumulated into it; then normalize and the
// lse. It reads the inputs as FlashAttention's varlen and KV-cache kernels do: packed q, k, v
// at their cu_seqlens offsets, K and V from the paged cache through the block table.
#include <algorithm>

#include "core/parallel.h"
#include "kernels/common/stage_graphs.h"
#include "kernels/cpu_emulated/buffer_io.h"
#include "kernels/cpu_emulated/cpu_implementations.h"
#include "kernels/cpu_emulated/emulate.h"
#include "kernels/cpu_emulated/head_reader.h"
#include "reference/attention.h"

namespace fc {
namespace {

constexpr std::int64_t kPageWidth = 64;

class CpuPaged final : public Implementation {
 public:
  std::string name() const override { return "cpu-emulated-paged"; }
  std::string summary() const override {
    return "CPU, online softmax over pages of 64 keys: rescale and accumulate per page, normalize and lse at the end; "
           "reads packed (varlen) q, k, v and the paged KV cache; no GPU needed";
  }
  bool on_gpu() const override { return false; }
  std::vector<std::string> faults() const override {
    return {"first-page-rescale", "beta-first-page",   "stale-scores",       "no-max-subtract",
            "masked-row-nan",     "varlen-cu-seqlens", "block-table-stride", "production-epilogue-scale"};
  }

  StageGraph stage_graph(const Problem& p) const override {
    PagedGraph o;
    o.page_width = kPageWidth;
    o.rescale_first_page = faulty("first-page-rescale");
    o.accumulate_first_page = faulty("beta-first-page");
    o.lse = true;
    return paged_stage_graph(p, o);
  }


  void prepare(const Problem& p, Workspace& ws, bool) override {
    const Shape& s = p.shape;
    const std::int64_t rows = s.batch * s.heads * s.q_len;
    scores_ = &ws.allocate("scores_page", DType::f32, rows * kPageWidth);
    p_tilde_ = &ws.allocate("p_tilde_page", p.dtype, rows * kPageWidth);
    max_ = &ws.allocate("row_max", DType::f32, rows);
    sum_ = &ws.allocate("row_sum", DType::f32, rows);
    rescale_ = &ws.allocate("rescale", DType::f32, rows);
    acc_ = &ws.allocate("acc", DType::f32, rows * s.head_dim);
    out_ = &ws.allocate("output", p.dtype, rows * s.head_dim);
    lse_ = &ws.allocate("lse", DType::f32, rows);
  }

  void run(RunContext& ctx) override {
    const AttentionInputs& in = ctx.inputs;
    const Shape& s = in.problem.shape;
    const DType io = in.problem.dtype;
    const std::int64_t heads = s.batch * s.heads;
    const Dims rows{s.batch, s.heads, s.q_len}, acc_dims{s.batch, s.heads, s.q_len, s.head_dim};
    const StageGraph graph = stage_graph(in.problem);
    const std::vector<PageStages> stages = page_stages(graph);
    const std::int64_t pages = static_cast<std::int64_t>(stages.size());
    emu::ReadFaults read_faults;
    read_faults.q_offsets_from_k = faulty("varlen-cu-seqlens");
    read_faults.table_stride = faulty("block-table-stride");
    const emu::HeadReader reader(in, true, read_faults);
    std::vector<HeadInputs> head(static_cast<std::size_t>(heads));
    parallel_for(heads, [&](std::int64_t bh) { head[static_cast<std::size_t>(bh)] = reader.head(bh / s.heads, bh % s.heads); });

    for (std::int64_t j = 0; j < pages; ++j) {
      const PageStages& st = stages[static_cast<std::size_t>(j)];
      const std::int64_t c0 = j * kPageWidth, c1 = std::min(s.kv_len, c0 + kPageWidth), n = c1 - c0;
      const Dims page_dims{s.batch, s.heads, s.q_len, n};

      if (!(faulty("stale-scores") && j == 1)) {  // stale-scores: page 1 keeps page 0's scores
        parallel_for(heads, [&](std::int64_t bh) {
          emu::write_block(*scores_, bh, emu::qk(head[static_cast<std::size_t>(bh)], c0, c1, DType::f32));
        });
      }
      if (ctx.tap) ctx.tap->capture(st.qk, 0, scores_->view(page_dims));

      parallel_for(heads, [&](std::int64_t bh) {
        const MatrixR prev_max = j == 0 ? MatrixR::Constant(s.q_len, 1, -INFINITY) : emu::read_block(*max_, bh, s.q_len, 1);
        const MatrixR prev_sum = j == 0 ? MatrixR::Zero(s.q_len, 1) : emu::read_block(*sum_, bh, s.q_len, 1);
        const emu::OnlineSoftmax os = emu::online_softmax(emu::read_block(*scores_, bh, s.q_len, n), prev_max, prev_sum,
                                                          io, {!faulty("no-max-subtract"), !faulty("masked-row-nan")});
        emu::write_block(*p_tilde_, bh, os.p_tilde);
        emu::write_block(*max_, bh, os.max);
        emu::write_block(*sum_, bh, os.sum);
        emu::write_block(*rescale_, bh, os.rescale);
      });
      if (ctx.tap) {
        ctx.tap->capture(st.softmax, 0, p_tilde_->view(page_dims));
        ctx.tap->capture(st.softmax, 1, max_->view(rows));
        ctx.tap->capture(st.softmax, 2, sum_->view(rows));
      }

      if (st.has_rescale) {  // first-page-rescale: page 0 rescales the unwritten accumulator
        parallel_for(heads, [&](std::int64_t bh) {
          const MatrixR acc = emu::read_block(*acc_, bh, s.q_len, s.head_dim);
          emu::write_block(*acc_, bh, emu::rescale(acc, emu::read_block(*rescale_, bh, s.q_len, 1), DType::f32));
        });
        if (ctx.tap) ctx.tap->capture(st.rescale, 0, acc_->view(acc_dims));
      }

      parallel_for(heads, [&](std::int64_t bh) {
        const MatrixR v = head[static_cast<std::size_t>(bh)].v().middleRows(c0, n);
        const MatrixR pt = emu::read_block(*p_tilde_, bh, s.q_len, n);
        const bool accumulate = graph.stages[st.pv].reads_own_output;  // beta-first-page: page 0 too
        const MatrixR acc = accumulate ? emu::read_block(*acc_, bh, s.q_len, s.head_dim) : MatrixR();
        emu::write_block(*acc_, bh, emu::pv(pt, v, accumulate ? &acc : nullptr, io, DType::f32));
      });
      if (ctx.tap) ctx.tap->capture(st.pv, 0, acc_->view(acc_dims));
    }

    // production-epilogue-scale: the production build (no trace wanted) scales its output.
    const double output_scale = faulty("production-epilogue-scale") && !ctx.traced() ? 1.5 : 1.0;
    parallel_for(heads, [&](std::int64_t bh) {
      const MatrixR acc = emu::read_block(*acc_, bh, s.q_len, s.head_dim);
      const MatrixR l = emu::read_block(*sum_, bh, s.q_len, 1);
      emu::write_block(*out_, bh, emu::normalize(acc, l, io) * output_scale);
      emu::write_block(*lse_, bh, emu::lse(emu::read_block(*max_, bh, s.q_len, 1), l, DType::f32));
    });
    if (ctx.tap) {
      ctx.tap->capture(graph.stages.size() - 1, 0, out_->view(acc_dims));
      ctx.tap->capture(graph.stages.size() - 1, 1, lse_->view(rows));
    }
  }

 private:
  Buffer *scores_ = nullptr, *p_tilde_ = nullptr, *max_ = nullptr, *sum_ = nullptr, *rescale_ = nullptr;
  Buffer *acc_ = nullptr, *out_ = nullptr, *lse_ = nullptr;
};

}  // namespace

std::unique_ptr<Implementation> make_cpu_paged() { return std::make_unique<CpuPaged>(); }

}  // namespace fc

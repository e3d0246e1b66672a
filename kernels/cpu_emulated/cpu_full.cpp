// cpu-emulated: an unfused attention on the CPU with a GPU kernel's arithmetic (fp32 scores,
// fp32 softmax with fast exp, fp32-accumulated P.V stored in the input format). It runs
// where no GPU is, so every machine can trace a real implementation end to end.
#include <algorithm>
#include <optional>
#include <string>

#include "core/parallel.h"
#include "core/resource_usage.h"
#include "kernels/common/stage_graphs.h"
#include "kernels/cpu_emulated/buffer_io.h"
#include "kernels/cpu_emulated/cpu_implementations.h"
#include "kernels/cpu_emulated/emulate.h"
#include "kernels/cpu_emulated/head_reader.h"
#include "reference/attention.h"

namespace fc {
namespace {

class CpuFull final : public Implementation {
 public:
  std::string name() const override { return "cpu-emulated"; }
  std::string summary() const override {
    return "CPU, unfused: fp32 scores, fp32 softmax (exp2-based exp), fp32-accumulated P.V; no GPU needed";
  }
  bool on_gpu() const override { return false; }
  std::vector<std::string> faults() const override {
    return {"no-max-subtract", "masked-row-nan", "gqa-head-mod", "window-off-by-one", "softcap-after-mask"};
  }

  StageGraph stage_graph(const Problem& p) const override { return full_stage_graph(p, {}); }

  // The emulation holds whole heads: fp32 scores and probabilities of every head, and on each
  // thread three Sq x Sk FP64 matrices (the scores, the softmax's input and its output). A case
  // whose memory that exceeds is declined before it runs (at B1 H1 S30000 it took 21 GB).
  std::optional<std::string> unsupported(const Problem& p) const override {
    const Shape& s = p.shape;
    const double scores = static_cast<double>(s.q_len) * static_cast<double>(s.kv_len);
    const double threads = static_cast<double>(std::min<std::int64_t>(parallel_threads(), s.batch * s.heads));
    const double bytes = 8 * scores * static_cast<double>(s.batch * s.heads) + 3 * 8 * scores * threads;
    const std::optional<std::string> why = host_memory_shortfall(bytes, "its whole-head FP64 matrices");
    if (!why) return std::nullopt;
    return *why + " (cpu-emulated-paged holds a page at a time)";
  }


  void prepare(const Problem& p, Workspace& ws, bool) override {
    const Shape& s = p.shape;
    const std::int64_t heads = s.batch * s.heads;
    scores_ = &ws.allocate("scores", DType::f32, heads * s.q_len * s.kv_len);
    probs_ = &ws.allocate("probs", DType::f32, heads * s.q_len * s.kv_len);
    max_ = &ws.allocate("row_max", DType::f32, heads * s.q_len);
    sum_ = &ws.allocate("row_sum", DType::f32, heads * s.q_len);
    out_ = &ws.allocate("output", p.dtype, heads * s.q_len * s.head_dim);
  }

  void run(RunContext& ctx) override {
    const AttentionInputs& in = ctx.inputs;
    const Shape& s = in.problem.shape;
    const std::int64_t heads = s.batch * s.heads;
    const Dims score_dims{s.batch, s.heads, s.q_len, s.kv_len}, row_dims{s.batch, s.heads, s.q_len};
    emu::ReadFaults read_faults;
    read_faults.kv_head_modulo = faulty("gqa-head-mod");
    read_faults.window_off_by_one = faulty("window-off-by-one");
    const emu::HeadReader reader(in, false, read_faults);

    parallel_for(heads, [&](std::int64_t bh) {
      const HeadInputs head = reader.head(bh / s.heads, bh % s.heads);
      emu::write_block(*scores_, bh, emu::qk(head, 0, s.kv_len, DType::f32, std::nullopt, faulty("softcap-after-mask")));
    });
    if (ctx.tap) ctx.tap->capture(0, 0, scores_->view(score_dims));

    parallel_for(heads, [&](std::int64_t bh) {
      const emu::Softmax sm = emu::softmax(emu::read_block(*scores_, bh, s.q_len, s.kv_len), DType::f32,
                                           {!faulty("no-max-subtract"), !faulty("masked-row-nan")});
      emu::write_block(*probs_, bh, sm.p);
      emu::write_block(*max_, bh, sm.max);
      emu::write_block(*sum_, bh, sm.sum);
    });
    if (ctx.tap) {
      ctx.tap->capture(1, 0, probs_->view(score_dims));
      ctx.tap->capture(1, 1, max_->view(row_dims));
      ctx.tap->capture(1, 2, sum_->view(row_dims));
    }

    parallel_for(heads, [&](std::int64_t bh) {
      const MatrixR v = reader.head(bh / s.heads, bh % s.heads, false).v();
      const MatrixR p = emu::read_block(*probs_, bh, s.q_len, s.kv_len);
      emu::write_block(*out_, bh, emu::pv(p, v, nullptr, DType::f32, in.problem.dtype));
    });
    if (ctx.tap) ctx.tap->capture(2, 0, out_->view({s.batch, s.heads, s.q_len, s.head_dim}));
  }

 private:
  Buffer *scores_ = nullptr, *probs_ = nullptr, *max_ = nullptr, *sum_ = nullptr, *out_ = nullptr;
};

}  // namespace

std::unique_ptr<Implementation> make_cpu_full() { return std::make_unique<CpuFull>(); }

}  // namespace fc

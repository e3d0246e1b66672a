// naive: qk, softmax and pv as three plain CUDA kernels over whole rows (fp32 scores and
// probabilities, output in the input format). The known-good GPU baseline: any head dim,
// GQA, windows, softcap, ALiBi, varlen and paged problems (on their padded tensors).
#include "kernels/common/device_inputs.h"
#include "kernels/common/stage_graphs.h"
#include "kernels/naive/naive.h"
#include "kernels/naive/naive_kernels.h"

namespace fc {
namespace {

class Naive final : public Implementation {
 public:
  std::string name() const override { return "naive"; }
  std::string summary() const override {
    return "GPU, three plain kernels: fp32 scores, fp32 softmax over whole rows, fp32-accumulated P.V";
  }
  bool on_gpu() const override { return true; }
  std::vector<std::string> faults() const override {
    return {"fp16-scores",       "no-max-subtract",    "masked-row-nan",    "gqa-head-mod",
            "window-off-by-one", "softcap-after-mask", "index-overflow-32"};
  }

  StageGraph stage_graph(const Problem& p) const override {
    const bool fp16_scores = faulty("fp16-scores");
    StageGraph g = full_stage_graph(p, {fp16_scores ? DType::f16 : DType::f32, fp16_scores ? p.scale : 1.0, DType::f32, false});
    g.query_tile = 32;  // the 32 x 32 tiles of its kernels
    return g;
  }


  void prepare(const Problem& p, Workspace& ws, bool) override {
    const Shape& s = p.shape;
    const std::int64_t rows = s.batch * s.heads * s.q_len;
    scores_ = &ws.allocate("scores", faulty("fp16-scores") ? DType::f16 : DType::f32, rows * s.kv_len);
    probs_ = &ws.allocate("probs", DType::f32, rows * s.kv_len);
    max_ = &ws.allocate("row_max", DType::f32, rows);
    sum_ = &ws.allocate("row_sum", DType::f32, rows);
    out_ = &ws.allocate("output", p.dtype, rows * s.head_dim);
  }

  void run(RunContext& ctx) override {
    const Problem& p = ctx.inputs.problem;
    const Shape& s = p.shape;
    const DeviceInputs& in = *ctx.device;
    const Dims scores{s.batch, s.heads, s.q_len, s.kv_len}, rows{s.batch, s.heads, s.q_len};

    const NaiveFaults faults{faulty("fp16-scores"), faulty("no-max-subtract"), faulty("masked-row-nan"),
                             faulty("gqa-head-mod"), faulty("softcap-after-mask"), faulty("index-overflow-32")};
    DeviceMask mask = in.mask();
    mask.window_off_by_one = faulty("window-off-by-one") ? 1 : 0;
    launch_naive_qk(in.q(), in.k(), p.dtype, s, static_cast<float>(p.scale), static_cast<float>(p.softcap), mask,
                    scores_->data, faults, ctx.stream);
    if (ctx.tap) ctx.tap->capture(0, 0, scores_->view(scores));

    launch_naive_softmax(scores_->data, static_cast<float>(p.scale), s, probs_->as<float>(), max_->as<float>(),
                         sum_->as<float>(), faults, ctx.stream);
    if (ctx.tap) {
      ctx.tap->capture(1, 0, probs_->view(scores));
      ctx.tap->capture(1, 1, max_->view(rows));
      ctx.tap->capture(1, 2, sum_->view(rows));
    }

    launch_naive_pv(probs_->as<float>(), in.v(), p.dtype, s, out_->data, faults, ctx.stream);
    if (ctx.tap) ctx.tap->capture(2, 0, out_->view({s.batch, s.heads, s.q_len, s.head_dim}));
  }

 private:
  Buffer *scores_ = nullptr, *probs_ = nullptr, *max_ = nullptr, *sum_ = nullptr, *out_ = nullptr;
};

}  // namespace

std::unique_ptr<Implementation> make_naive() { return std::make_unique<Naive>(); }

}  // namespace fc

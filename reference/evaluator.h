#pragma once
// The stage evaluation functions (stage_eval.h) of one head's inputs, run where the reference
// runs: on the host with Eigen, or on a GPU (reference/gpu/). The chains (attention.h) and the
// stage-local references call them through this interface, so the choice of device changes
// where the FP64 arithmetic happens, never what it computes (stage_math.h is shared).
// A GPU evaluator keeps what it computes on the device (Bounded::device) and compares there:
// only metrics, and the references a caller asks for (to_host), come back.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/step_profile.h"
#include "reference/compare.h"
#include "reference/stage_eval.h"

namespace fc {

struct ChainArithmetic;  // attention.h
struct TileReference;

// A captured [B,H,R(,C)] or [B,H,R] tensor where it is kept: a host tensor, or device memory
// holding the same dims in logical row-major order.
struct CapturedTensor {
  const HostTensor* host = nullptr;  // null: on the device
  const void* device = nullptr;
  DType dtype = DType::f32;
  Dims dims;

  static CapturedTensor on_host(const HostTensor& t) { return {&t, nullptr, t.dtype(), t.dims()}; }
};

// One thread uses a head evaluator (the GPU's caches and stream are its own); a tensor it keeps
// on the device is read by it alone and lives no longer than its EvaluatorSource.
class HeadEvaluator {
 public:
  virtual ~HeadEvaluator() = default;
  virtual const HeadInputs& inputs() const = 0;

  virtual Bounded qk(std::int64_t col_begin, std::int64_t col_end, const Arithmetic& a) const = 0;
  virtual SoftmaxResult softmax(const Bounded& scores, const Arithmetic& a) const = 0;
  virtual OnlineSoftmaxResult online_softmax(const Bounded& scores_tile, const Bounded& prev_max,
                                             const Bounded& prev_sum, const Arithmetic& a) const = 0;
  virtual Bounded rescale(const Bounded& acc, const Bounded& prev_max, const Bounded& new_max,
                          const Arithmetic& a) const = 0;
  // p v over the value rows of keys [key_begin, key_end) (+ acc).
  virtual Bounded pv(const Bounded& p, std::int64_t key_begin, std::int64_t key_end, const Bounded* acc,
                     const Arithmetic& a) const = 0;
  virtual Bounded normalize(const Bounded& acc, const Bounded& sum, const Arithmetic& a) const = 0;
  // out, the end of a chain whose P.V (arithmetic pv) summed the value rows of keys
  // [key_begin, key_end), with each bound capped to the range those rows allow
  // (stage_math::range_cap).
  virtual Bounded within_value_range(const Bounded& out, std::int64_t key_begin, std::int64_t key_end,
                                     const Arithmetic& pv) const = 0;
  virtual Bounded lse(const Bounded& max, const Bounded& sum, const Arithmetic& a) const = 0;
  virtual Bounded combine(const std::vector<Bounded>& outs, const std::vector<Bounded>& lses,
                          const Arithmetic& a) const = 0;
  virtual Bounded combine_lse(const std::vector<Bounded>& lses, const Arithmetic& a) const = 0;

  // Batches of independent evaluations, each item as the single call above would give it. A
  // GPU evaluator evaluates each run of items that lie one after another in its memory (the
  // tiles of one stack, as its own batched evaluations and captured_each make them) at once.
  struct OnlineSoftmaxItem {
    const Bounded *scores, *prev_max, *prev_sum;
  };
  struct RescaleItem {
    const Bounded *acc, *prev_max, *new_max;
  };
  struct PvItem {
    const Bounded* p;
    std::int64_t key_begin, key_end;
    const Bounded* acc;  // null: none
  };
  virtual std::vector<OnlineSoftmaxResult> online_softmax_each(const std::vector<OnlineSoftmaxItem>& items,
                                                               const Arithmetic& a) const;
  virtual std::vector<Bounded> rescale_each(const std::vector<RescaleItem>& items, const Arithmetic& a) const;
  virtual std::vector<Bounded> pv_each(const std::vector<PvItem>& items, const Arithmetic& a) const;

  // The blocked chain (attention.h, blocked_reference) over the first whole tiles of keys
  // [col_begin, col_end), evaluated at once and appended to `tiles`; returns how many (0: this
  // evaluator goes tile by tile, and blocked_reference does).
  virtual std::int64_t whole_tiles(std::int64_t col_begin, std::int64_t col_end, std::int64_t tile_width,
                                   const ChainArithmetic& a, std::vector<TileReference>& tiles) const;

  // Rows `rows` (all when null) of head (b, h) of a captured [B,H,R,C] or [B,H,R] tensor,
  // times `scale`, exact, in `format`, where this evaluator works (the GPU's widens the rows
  // where they are kept, uploading them as stored, 2 or 4 bytes an element, from the host).
  virtual Bounded captured(const CapturedTensor& t, std::int64_t b, std::int64_t h,
                           const std::vector<std::int64_t>* rows, double scale, DType format) const;

  // captured() of each tensor (one shape and format; a GPU evaluator stacks them, as tiles).
  virtual std::vector<Bounded> captured_each(const std::vector<CapturedTensor>& tensors, std::int64_t b,
                                             std::int64_t h, const std::vector<std::int64_t>* rows, double scale,
                                             DType format) const;

  // b with its matrices on the host (read back from the device where it lives there).
  virtual Bounded to_host(const Bounded& b) const = 0;
  // b where this evaluator works on it (moved to the device once, for the calls that read it).
  virtual Bounded resident(const Bounded& b) const = 0;
  // compare_head (compare.h) over the top-left rows x cols of the kernel's exact values and a
  // reference.
  virtual Metrics compare(const HeadSpot& spot, const Bounded& kernel, const Bounded& reference, std::int64_t rows,
                          std::int64_t cols, DType kernel_format, BoundChoice judged_by) const = 0;
  struct CompareItem {
    HeadSpot spot;
    const Bounded *kernel, *reference;
    std::int64_t rows, cols;
    DType kernel_format;
  };
  // compare() of each item (a GPU evaluator reads every result back at once).
  virtual std::vector<Metrics> compare_each(const std::vector<CompareItem>& items, BoundChoice judged_by) const;

  // Waits for the work queued so far (a GPU evaluator's stream); nothing on the host.
  virtual void finish_queued() const {}
  // Steps of this evaluator's work are timed into `profile` (core/step_profile.h) when set.
  void profile_into(StepProfile* profile) { profile_ = profile; }
  // A timer of one step of this evaluator's work ("parent / child" names a nested one).
  StepTimer step(std::string name) const {
    return StepTimer(profile_, std::move(name), [this] { finish_queued(); });  // nothing without a profile
  }

 private:
  StepProfile* profile_ = nullptr;
};

// Makes the evaluator of each head (or block of rows); safe to call from several threads.
class EvaluatorSource {
 public:
  virtual ~EvaluatorSource() = default;
  // `in` must outlive the evaluator.
  virtual std::unique_ptr<HeadEvaluator> for_head(const HeadInputs& in) const = 0;
  virtual const char* device() const = 0;  // "cpu", "gpu"
  // How many heads may be evaluated at once (0: as many as there are threads): each GPU
  // evaluator holds a few dozen block-sized FP64 tensors on the one device.
  virtual int concurrency() const { return 0; }
  // Elements (rows x keys) of the largest block of rows one evaluator judges (attention.h,
  // kRowBlockElements on the host).
  virtual std::int64_t block_elements() const;
};

// HeadEvaluator::captured on the host: the rows converted to FP64 there (read back first
// when the tensor is kept on the device).
Bounded captured_on_host(const CapturedTensor& t, std::int64_t b, std::int64_t h, const std::vector<std::int64_t>* rows,
                         double scale, DType format);

// The Eigen evaluator of stage_eval.h.
std::unique_ptr<HeadEvaluator> host_evaluator(const HeadInputs& in);
const EvaluatorSource& host_evaluators();

}  // namespace fc

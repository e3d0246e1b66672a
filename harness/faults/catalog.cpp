#include "harness/faults/catalog.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/numeric.h"
#include "core/packed.h"
#include "harness/trace/stage_reference.h"
#include "reference/matrix.h"

namespace fc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kFp32ExpUnderflow = -103.97;  // exp below this is 0 in fp32 (past the subnormals)

const Index4 kFirstElement{0, 0, 0, 0};

CaseSpec trigger(Shape shape, const std::string& mask, const std::string& dist, std::uint64_t seed = 1) {
  CaseSpec c;
  c.shape = shape;
  c.mask = mask;
  c.dist = dist;
  c.seed = seed;
  return c;
}

// The first stage of `kind` in execution order (of tile `tile`, or any tile when -2).
const Stage* first_stage(const StageGraph& g, StageKind kind, int tile = -2) {
  for (const Stage& s : g.stages) {
    if (s.kind == kind && (tile == -2 || s.tile == tile)) return &s;
  }
  return nullptr;
}

std::string first_output(const StageGraph& g, StageKind kind, int tile = -2) {
  const Stage* s = first_stage(g, kind, tile);
  if (!s) throw Error(std::string("fault expectation: the stage graph has no ") + stage_kind_name(kind));
  return s->output_name(0);
}

// The end-to-end reference of each head, computed on first use and kept: a search over the
// stages of a paged graph visits every head once per stage.
class HeadReferences {
 public:
  HeadReferences(const AttentionInputs& in, const StageGraph& g)
      : in_(in), g_(g), maps_(static_cast<std::size_t>(in.problem.shape.batch * in.problem.shape.heads)) {}
  const QuantityMap& at(std::int64_t b, std::int64_t h) {
    std::optional<QuantityMap>& map = maps_[static_cast<std::size_t>(b * in_.problem.shape.heads + h)];
    if (!map) map = end_to_end_reference(head_inputs(in_, b, h), in_.problem.shape, g_);
    return *map;
  }

 private:
  const AttentionInputs& in_;
  const StageGraph& g_;
  std::vector<std::optional<QuantityMap>> maps_;
};

// Visits the heads in (b, h) order with their end-to-end reference; stops at the first
// element `fails(head map, b, h)` returns.
std::optional<Index4> first_in_heads(const Shape& s, HeadReferences& references,
                                     const std::function<std::optional<Index4>(const QuantityMap&, std::int64_t,
                                                                               std::int64_t)>& fails) {
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h) {
      if (std::optional<Index4> at = fails(references.at(b, h), b, h)) return at;
    }
  return std::nullopt;
}

// The first element of the first tensor (in the stages' order) for which `fails` is true.
using ElementTest = std::function<bool(const Stage&, const Bounded& ref, const QuantityMap&, Eigen::Index row,
                                       Eigen::Index col)>;

Expectation first_failing(const AttentionInputs& in, const StageGraph& g, StageKind kind, const std::string& cause,
                          const ElementTest& fails, Quantity quantity) {
  HeadReferences references(in, g);
  for (const Stage& st : g.stages) {
    if (st.kind != kind) continue;
    const std::int64_t offset = stage_columns(in.problem.shape, g.algorithm, st).begin;
    const std::optional<Index4> at =
        first_in_heads(in.problem.shape, references, [&](const QuantityMap& map, std::int64_t b, std::int64_t h) {
          const Bounded& ref = map.at({quantity, st.split, st.tile});
          for (Eigen::Index r = 0; r < ref.value.rows(); ++r)
            for (Eigen::Index c = 0; c < ref.value.cols(); ++c) {
              if (fails(st, ref, map, r, c)) return std::optional<Index4>(Index4{b, h, r, offset + c});
            }
          return std::optional<Index4>();
        });
    if (at) return {st.output_name(0), cause, at};
  }
  return {"(no stage fails)", cause, std::nullopt};
}

// exp(x) as fp32 computes it without the max subtracted: overflow to inf, underflow to 0.
double fp32_exp(double x) {
  if (x > kFp32ExpOverflow) return kInf;
  if (x < kFp32ExpUnderflow) return 0.0;
  return std::exp(x);
}

bool differs(double kernel, double ref, double bound) {
  if (!std::isfinite(ref)) return kernel != ref;
  return !std::isfinite(kernel) || std::fabs(kernel - ref) > bound;
}

Expectation expect_no_max_subtract(const AttentionInputs& in, const StageGraph& g) {
  if (g.algorithm.kind == Algorithm::Kind::full) {
    // p = exp(s) / sum exp(s): equal to softmax unless an exp overflows (inf/inf, x/inf).
    return first_failing(
        in, g, StageKind::softmax, "exp-overflow",
        [row_of = static_cast<const MatrixR*>(nullptr), row = Eigen::Index{-1}, total = 0.0](
            const Stage&, const Bounded& p, const QuantityMap& map, Eigen::Index r, Eigen::Index c) mutable {
          const MatrixR& s = map.at({Quantity::scores}).value;
          if (&s != row_of || r != row) {  // the row's sum once, not once per element
            row_of = &s;
            row = r;
            total = 0;
            for (Eigen::Index j = 0; j < s.cols(); ++j) total += fp32_exp(s(r, j));
          }
          const double faulty = fp32_exp(s(r, c)) / total;
          return std::isinf(total) && differs(faulty, p.value(r, c), p.tight(r, c));
        },
        Quantity::probs);
  }
  // p~ = exp(s) instead of exp(s - running max).
  return first_failing(
      in, g, StageKind::softmax, "exp-overflow",
      [](const Stage& st, const Bounded& pt, const QuantityMap& map, Eigen::Index r, Eigen::Index c) {
        const double s = map.at({Quantity::scores, st.split, st.tile}).value(r, c);
        return differs(fp32_exp(s), pt.value(r, c), pt.tight(r, c));
      },
      Quantity::p_tilde);
}

// One head's inputs as a faulty implementation reads them (wrong K/V head, wrong rows, a
// wrong mask or score function), in FP64.
using FaultyHead = std::function<HeadInputs(std::int64_t b, std::int64_t h)>;

// The first element, in the execution order of the stage outputs and then (b, h, row, col)
// over what exists, where the end-to-end reference of the faulty head inputs differs from
// the clean one by more than the clean bound: where a kernel that reads wrong operands or
// applies a wrong mask shows it first.
Expectation first_difference(const AttentionInputs& in, const StageGraph& g, const std::string& cause,
                             const FaultyHead& faulty_head) {
  const Shape& s = in.problem.shape;
  HeadReferences clean(in, g);
  std::vector<std::optional<QuantityMap>> faulty(static_cast<std::size_t>(s.batch * s.heads));
  for (const Stage& st : g.stages) {
    for (std::size_t o = 0; o < st.outputs.size(); ++o) {
      const StageOutput& out = st.outputs[o];
      const bool key_indexed = out.quantity == Quantity::scores || out.quantity == Quantity::p_tilde;
      const std::int64_t offset = key_indexed ? stage_columns(s, g.algorithm, st).begin : 0;
      for (std::int64_t b = 0; b < s.batch; ++b)
        for (std::int64_t h = 0; h < s.heads; ++h) {
          std::optional<QuantityMap>& mine = faulty[static_cast<std::size_t>(b * s.heads + h)];
          if (!mine) mine = end_to_end_reference(faulty_head(b, h), s, g);
          const Bounded& ref = clean.at(b, h).at(key_of(st, out));
          const MatrixR& wrong = mine->at(key_of(st, out)).value;
          const Extent e = existing_extent(in.problem, g.algorithm, st, out, b);
          for (Eigen::Index r = 0; r < e.rows; ++r)
            for (Eigen::Index c = 0; c < e.cols; ++c) {
              if (differs(wrong(r, c), ref.value(r, c), ref.tight(r, c))) {
                return {st.output_name(o), cause, Index4{b, h, r, is_row_quantity(out.quantity) ? -1 : offset + c}};
              }
            }
        }
    }
  }
  return {"(no stage fails)", cause, std::nullopt};
}

// Rows [first, first + count) of head `head` of a packed [rows, heads, D] tensor, as [total, D].
MatrixR packed_rows(const HostTensor& packed, std::int64_t first, std::int64_t count, std::int64_t head,
                    std::int64_t total) {
  const Dims& d = packed.dims();
  MatrixR m = MatrixR::Zero(total, d[2]);
  for (std::int64_t r = 0; r < count; ++r)
    for (std::int64_t c = 0; c < d[2]; ++c) m(r, c) = packed.get(((first + r) * d[1] + head) * d[2] + c);
  return m;
}

// The first row of the first softmax stage whose keys there are all masked.
Expectation expect_masked_row_nan(const AttentionInputs& in, const StageGraph& g) {
  const Stage* first = first_stage(g, StageKind::softmax);
  return first_failing(
      in, g, StageKind::softmax, "fully-masked-row",
      [first](const Stage& st, const Bounded&, const QuantityMap& map, Eigen::Index r, Eigen::Index c) {
        if (&st != first || c != 0) return false;
        return map.at({Quantity::scores, st.split, st.tile}).value.row(r).maxCoeff() == -kInf;
      },
      g.algorithm.kind == Algorithm::Kind::full ? Quantity::probs : Quantity::p_tilde);
}

}  // namespace

namespace {
std::vector<FaultSpec>& catalog_storage() {
  static std::vector<FaultSpec> catalog = [] {
    std::vector<FaultSpec> c;
    const std::vector<std::string> paged{"cublaslt-paged", "cpu-emulated-paged"};
    const std::vector<std::string> lt{"cublaslt-paged", "cublaslt-splitk"};
    const std::vector<std::string> softmaxes{"naive", "cublaslt-paged", "cublaslt-splitk", "cpu-emulated",
                                             "cpu-emulated-paged"};

    c.push_back({"first-page-rescale", "O rescaled by r on page 0 while O is uninitialized (0 * NaN)", paged,
                 trigger({1, 1, 32, 256, 64}, "none", "normal"), "rescale[0]", "uninitialized-read",
                 [](const AttentionInputs&, const StageGraph& g) {
                   return Expectation{first_output(g, StageKind::rescale, 0), "uninitialized-read", kFirstElement};
                 }});
    c.push_back({"beta-first-page", "P~.V with beta = 1 on page 0: accumulates stale memory", paged,
                 trigger({1, 1, 32, 256, 64}, "none", "normal"), "pv[0]", "stale-accumulator",
                 [](const AttentionInputs&, const StageGraph& g) {
                   return Expectation{first_output(g, StageKind::pv, 0), "stale-accumulator", kFirstElement};
                 }});
    c.push_back({"stale-scores", "the second page's scores never computed: the buffer still holds the first page's",
                 paged, trigger({1, 1, 32, 256, 64}, "none", "normal"), "qk[1]", "unwritten-output",
                 [](const AttentionInputs& in, const StageGraph& g) {
                   // The second page's kernel holds the first page's scores (within their bound).
                   return first_failing(
                       in, g, StageKind::qk, "unwritten-output",
                       [](const Stage& st, const Bounded& s1, const QuantityMap& map, Eigen::Index r, Eigen::Index col) {
                         if (st.tile != 1) return false;
                         const Bounded& s0 = map.at({Quantity::scores, -1, 0});
                         return differs(s0.value(r, col), s1.value(r, col), s1.tight(r, col) + s0.tight(r, col));
                       },
                       Quantity::scores);
                 }});
    c.push_back({"attr-int32", "64-bit layout attributes set from 4-byte ints, status ignored", lt,
                 trigger({2, 1, 32, 128, 64}, "none", "normal"), "the first qk", "descriptor-invalid",
                 [](const AttentionInputs&, const StageGraph& g) {
                   return Expectation{first_output(g, StageKind::qk), "descriptor-invalid", kFirstElement};
                 }});
    c.push_back({"rows-cols-swap", "K layout built with ROWS and COLS exchanged", lt,
                 trigger({1, 1, 32, 256, 64}, "none", "normal"), "the first qk", "layout-mismatch",
                 [](const AttentionInputs&, const StageGraph& g) {
                   return Expectation{first_output(g, StageKind::qk), "layout-mismatch", kFirstElement};
                 }});
    c.push_back({"fp16-scores", "Q.K^T stored in fp16 before the scale (overflows past 65504)",
                 {"naive", "cublaslt-paged", "cublaslt-splitk"}, trigger({1, 2, 128, 256, 64}, "none", "large"),
                 "the first qk holding a score past 65504 unscaled", "score-overflow",
                 [](const AttentionInputs& in, const StageGraph& g) {
                   const double scale = in.problem.scale;
                   return first_failing(
                       in, g, StageKind::qk, "score-overflow",
                       [scale](const Stage&, const Bounded& s, const QuantityMap&, Eigen::Index r, Eigen::Index col) {
                         return overflows(DType::f16, s.value(r, col) / scale);
                       },
                       Quantity::scores);
                 }});
    c.push_back({"no-max-subtract", "exp(s) without subtracting the row max", softmaxes,
                 trigger({1, 1, 32, 256, 64}, "none", "large"), "the first softmax", "exp-overflow",
                 expect_no_max_subtract});
    c.push_back({"masked-row-nan", "no guard for max = -inf: exp(-inf - (-inf)) = NaN", softmaxes,
                 trigger({2, 1, 32, 256, 64}, "padding=0,256", "normal"), "the first softmax", "fully-masked-row",
                 expect_masked_row_nan});
    c.push_back({"splitk-partial-scale", "partial O not divided by its sum while its lse still counts it",
                 {"flash-splitkv"}, trigger({1, 1, 64, 512, 64}, "none", "normal"), "normalize[0]", "scale-mismatch",
                 [](const AttentionInputs& in, const StageGraph& g) {
                   const Stage* st = first_stage(g, StageKind::normalize);
                   HeadReferences references(in, g);
                   const std::optional<Index4> at = first_in_heads(
                       in.problem.shape, references, [&](const QuantityMap& map, std::int64_t b, std::int64_t h) {
                         const Bounded& o = map.at({Quantity::partial_output, st->split, -1});
                         const KeyRange range = tile_columns(in.problem.shape, g.algorithm, st->split, -1);
                         const int last = static_cast<int>(tile_count(range.begin, range.end, g.algorithm.tile_width)) - 1;
                         const MatrixR& l = map.at({Quantity::row_sum, st->split, last}).value;
                         for (Eigen::Index r = 0; r < o.value.rows(); ++r)
                           for (Eigen::Index c = 0; c < o.value.cols(); ++c) {
                             if (differs(o.value(r, c) * l(r, 0), o.value(r, c), o.tight(r, c))) {
                               return std::optional<Index4>(Index4{b, h, r, c});
                             }
                           }
                         return std::optional<Index4>();
                       });
                   return Expectation{st->output_name(0), "scale-mismatch", at};
                 }});
    c.push_back({"combine-empty-split", "LSE combine of a row whose every split is masked: exp(-inf - (-inf))",
                 {"flash-splitkv"}, trigger({2, 1, 32, 512, 64}, "padding=0,512", "normal"), "combine",
                 "combine-empty-split", [](const AttentionInputs& in, const StageGraph& g) {
                   // The first row with no key at all: the mask alone says, no reference needed.
                   const Shape& s = in.problem.shape;
                   for (std::int64_t b = 0; b < s.batch; ++b)
                     for (std::int64_t h = 0; h < s.heads; ++h) {
                       const HeadInputs head = head_inputs(in, b, h);
                       for (Eigen::Index r = 0; r < head.bias.rows(); ++r) {
                         if (head.bias.row(r).maxCoeff() == -kInf) {
                           return Expectation{first_output(g, StageKind::combine), "combine-empty-split",
                                              Index4{b, h, r, 0}};
                         }
                       }
                     }
                   return Expectation{first_output(g, StageKind::combine), "combine-empty-split", std::nullopt};
                 }});
    c.push_back({"tail-page", "the last partial page read as a full page", {"cublaslt-paged"},
                 trigger({1, 1, 32, 200, 64}, "none", "normal"), "the last qk", "layout-mismatch",
                 [](const AttentionInputs&, const StageGraph& g) {
                   std::string last;
                   for (const Stage& s : g.stages) {
                     if (s.kind == StageKind::qk) last = s.output_name(0);
                   }
                   return Expectation{last, "layout-mismatch", std::nullopt};
                 }});
    c.push_back({"production-epilogue-scale",
                 "the production build's epilogue multiplies its output by 1.5; its trace build does not",
                 {"wmma-fused", "wgmma-fused", "flash-splitkv", "cpu-emulated-paged"},
                 trigger({1, 2, 64, 256, 64}, "none", "normal"),
                 "the first result of the production build", "trace-build-mismatch",
                 [](const AttentionInputs& in, const StageGraph& g) {
                   // The first result (output, or split 0's partial output): its first nonzero
                   // element is the first that 1.5x changes.
                   const Stage* st = nullptr;
                   for (const Stage& s : g.stages) {
                     if (!st && is_result(s.outputs[0].quantity)) st = &s;
                   }
                   if (!st) throw Error("fault expectation: the stage graph has no result");
                   HeadReferences references(in, g);
                   const std::optional<Index4> at = first_in_heads(
                       in.problem.shape, references, [&](const QuantityMap& map, std::int64_t b, std::int64_t h) {
                         const MatrixR& o = map.at(key_of(*st, st->outputs[0])).value;
                         for (Eigen::Index r = 0; r < o.rows(); ++r)
                           for (Eigen::Index c = 0; c < o.cols(); ++c) {
                             if (o(r, c) != 0) return std::optional<Index4>(Index4{b, h, r, c});
                           }
                         return std::optional<Index4>();
                       });
                   return Expectation{st->output_name(0) + " (production)", "trace-build-mismatch", at};
                 }});
    c.push_back({"gqa-head-mod", "GQA: query head h reads K/V head h % Hkv instead of h / (H / Hkv)",
                 {"naive", "cpu-emulated"}, trigger({1, 4, 32, 64, 64, 2}, "none", "normal"),
                 "the first qk, head 1", "wrong-operand", [](const AttentionInputs& in, const StageGraph& g) {
                   return first_difference(in, g, "wrong-operand", [&in](std::int64_t b, std::int64_t h) {
                     HeadInputs head = head_inputs(in, b, h);
                     head.set_kv(head_matrix(in.k, b, h % in.problem.shape.kv_head_count()),
                                 head_matrix(in.v, b, h % in.problem.shape.kv_head_count()));
                     return head;
                   });
                 }});
    c.push_back({"window-off-by-one", "sliding window: the oldest key of every window masked (left edge one key off)",
                 {"naive", "cpu-emulated"}, trigger({1, 2, 64, 64, 64}, "window=8,0", "normal"),
                 "the first qk, row 8", "mask-mismatch", [](const AttentionInputs& in, const StageGraph& g) {
                   return first_difference(in, g, "mask-mismatch", [&in](std::int64_t b, std::int64_t h) {
                     HeadInputs head = head_inputs(in, b, h);
                     const Problem& p = in.problem;
                     for (std::int64_t i = 0; i < head.bias.rows(); ++i) {
                       const std::int64_t oldest = i + p.diagonal_of(b) - p.mask.window.left;
                       if (oldest >= 0 && oldest < head.bias.cols()) head.bias(i, oldest) = -kInf;
                     }
                     return head;
                   });
                 }});
    c.push_back({"softcap-after-mask", "softcap applied after the mask: a masked key scores -softcap, not -inf",
                 {"naive", "cpu-emulated"}, trigger({1, 1, 32, 32, 64}, "causal+softcap=20", "normal"),
                 "the first qk, row 0 col 1", "mask-mismatch", [](const AttentionInputs& in, const StageGraph& g) {
                   return first_difference(in, g, "mask-mismatch", [&in](std::int64_t b, std::int64_t h) {
                     // c tanh((t + bias) / c) as the clean function of a bias chosen to give it.
                     HeadInputs head = head_inputs(in, b, h);
                     const double cap = head.softcap;
                     const MatrixR t = head.scale * (head.q * head.k().transpose());
                     head.bias = (cap * ((t + head.bias) / cap).array().tanh()).matrix() - t;
                     head.softcap = 0;
                     return head;
                   });
                 }});
    c.push_back({"varlen-cu-seqlens", "varlen: query rows read at cu_seqlens_k[b] instead of cu_seqlens_q[b]",
                 {"cpu-emulated-paged", "wmma-fused"}, trigger({3, 2, 40, 64, 64}, "varlen=20:30,30:50,10:64", "normal"),
                 "the first qk of sequence 1", "wrong-operand", [](const AttentionInputs& in, const StageGraph& g) {
                   const PackedInputs packed = pack_inputs(in);
                   return first_difference(in, g, "wrong-operand", [&](std::int64_t b, std::int64_t h) {
                     HeadInputs head = head_inputs(in, b, h);
                     head.q = packed_rows(packed.q, packed.cu_seqlens_k[static_cast<std::size_t>(b)],
                                          in.problem.q_len_of(b), h, in.problem.shape.q_len);
                     return head;
                   });
                 }});
    c.push_back({"block-table-stride", "paged KV: block table rows read max_blocks - 1 entries apart",
                 {"cpu-emulated-paged", "wmma-fused"}, trigger({2, 1, 32, 96, 64}, "paged=16", "normal"),
                 "the first qk of sequence 1", "wrong-operand", [](const AttentionInputs& in, const StageGraph& g) {
                   const PackedInputs packed = pack_inputs(in);
                   const Layout& l = in.problem.layout;
                   const Shape& s = in.problem.shape;
                   return first_difference(in, g, "wrong-operand", [&](std::int64_t b, std::int64_t h) {
                     HeadInputs head = head_inputs(in, b, h);
                     const std::int64_t kv_head = s.kv_head_of(h);
                     MatrixR k = head.k(), v = head.v();
                     for (std::int64_t j = 0; j < in.problem.kv_len_of(b); ++j) {
                       const std::int64_t at = (paged_row(l, l.max_blocks - 1, b, j) * s.kv_head_count() + kv_head) * s.head_dim;
                       for (std::int64_t c = 0; c < s.head_dim; ++c) {
                         k(j, c) = packed.k_cache.get(at + c);
                         v(j, c) = packed.v_cache.get(at + c);
                       }
                     }
                     head.set_kv(std::move(k), std::move(v));
                     return head;
                   });
                 }});
    // Scores [1,1,16392,65536] fp32: row 16384 is the first whose byte offset reaches 2^32; rows
    // 16384.. land over rows 0.. and are never written in their place. The harness names the
    // first wrapped row. Judged on a row sample (which takes the rows where an offset crosses
    // 2^32) so that the cell's FP64 reference stays small.
    c.push_back({"index-overflow-32", "a score row's byte offset held in 32 bits: it wraps once it passes 4 GiB",
                 {"naive"}, trigger({1, 1, 16392, 65536, 64}, "none", "normal"), "qk, the first wrapped row",
                 "index-overflow", [](const AttentionInputs& in, const StageGraph&) {
                   const Shape& s = in.problem.shape;
                   const std::int64_t row_bytes = s.kv_len * 4, wrap = std::int64_t{1} << 32;
                   const std::int64_t first_wrapped = (wrap + row_bytes - 1) / row_bytes;
                   return Expectation{"qk", "index-overflow", Index4{0, 0, first_wrapped, 0}};
                 }});
    c.back().keep_as_fixture = false;  // 8.6 GB of captured scores and probabilities
    c.back().rows = RowSpec{RowSpec::Kind::sample, 64, {}};
    c.push_back({"missing-sync", "no barrier between a K/V tile's copy into shared memory and its use (a race)",
                 {"wmma-fused"}, trigger({4, 8, 512, 512, 64}, "none", "normal"), "any (a race)", "any",
                 [](const AttentionInputs&, const StageGraph&) { return Expectation{"*", "*", std::nullopt}; }});
    c.back().keep_as_fixture = false;
    c.back().isolated = true;
    // The Hopper pipeline's hand-off bugs: a consumer reads a K slot before its TMA bytes have
    // landed (stale or uninitialized shared memory). Races: any stage and cause may show it.
    c.push_back({"missing-mbarrier-wait", "a consumer warpgroup reads a K tile without waiting on its full mbarrier (a race)",
                 {"wgmma-fused"}, trigger({4, 8, 512, 512, 64}, "none", "normal"), "any (a race)", "any",
                 [](const AttentionInputs&, const StageGraph&) { return Expectation{"*", "*", std::nullopt}; }});
    c.back().keep_as_fixture = false;
    c.back().isolated = true;
    c.push_back({"mbarrier-wrong-phase",
                 "a consumer waits on a K slot's full mbarrier with the other phase's parity: a race, or "
                 "(usually) a deadlock once the load has landed",
                 {"wgmma-fused"}, trigger({4, 8, 512, 512, 64}, "none", "normal"), "any (a race)", "any",
                 [](const AttentionInputs&, const StageGraph&) { return Expectation{"*", "*", std::nullopt}; }});
    c.back().keep_as_fixture = false;
    c.back().isolated = true;
    return c;
  }();
  return catalog;
}
}  // namespace

const std::vector<FaultSpec>& fault_catalog() { return catalog_storage(); }

void add_faults(const std::vector<FaultSpec>& faults) {
  for (const FaultSpec& f : faults) {
    if (find_fault(f.id)) throw Error("fault '" + f.id + "' is already in the catalog");
    catalog_storage().push_back(f);
  }
}

const FaultSpec* find_fault(const std::string& id) {
  for (const FaultSpec& f : fault_catalog()) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

}  // namespace fc

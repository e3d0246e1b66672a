#pragma once
// What one attention case is: shapes, element type, scale, mask, and the input tensors.
// Layout of every tensor is [batch, heads, rows, cols] row-major:
//   q [B,H,Sq,D], k and v [B,Hkv,Sk,D], scores and probabilities [B,H,Sq,Sk], output [B,H,Sq,D].
// Variable-length batches and paged KV caches are input layouts (Layout): the logical problem
// stays per-sequence attention on these padded tensors.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fc {

struct Shape {
  std::int64_t batch = 1, heads = 1, q_len = 1, kv_len = 1, head_dim = 64;
  // K/V heads (GQA, MQA); 0 means as many as query heads. Query head h reads K/V head
  // h / (heads / kv_heads), as PyTorch's enable_gqa and FlashAttention do.
  std::int64_t kv_heads = 0;

  std::int64_t kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
  std::int64_t group() const { return heads / kv_head_count(); }  // query heads per K/V head
  std::int64_t kv_head_of(std::int64_t h) const { return h / group(); }
  std::string to_string() const;  // "B2 H4 Sq128 Sk96 D64", "B1 H32:8 S4096 D128"
  bool operator==(const Shape& o) const;
};

// Causal alignment: top-left keeps key j for query i when j <= i (PyTorch's is_causal);
// bottom-right when j <= i + (Sk - Sq), so the last query sees every key.
enum class Causal : std::uint8_t { none, top_left, bottom_right };

// FlashAttention's window_size = (left, right), bottom-right aligned: query i keeps key j
// when i + (Sk - Sq) - left <= j <= i + (Sk - Sq) + right; -1 is unbounded on that side.
struct Window {
  std::int64_t left = -1, right = -1;
  bool active() const { return left >= 0 || right >= 0; }
  bool operator==(const Window& o) const { return left == o.left && right == o.right; }
};

// The mask is a sum of independent parts, each optional; a key is attended when every
// part allows it, and the additive biases (if any) are added to its score.
struct Mask {
  Causal causal = Causal::none;
  std::vector<std::int32_t> key_lengths;  // empty, or one per batch: keys >= length are masked
  Window window;
  // Empty, or one slope per query head: ALiBi bias -slope * |i - j + (Sk - Sq)|, as
  // FlashAttention's alibi_slopes.
  std::vector<double> alibi_slopes;
  // empty, or [Bm,Hm,Sq,Sk] with Bm in {1,B}, Hm in {1,H}: boolean (true = attend, as
  // PyTorch SDPA) or floating (additive bias, -inf allowed).
  HostTensor dense;

  bool has_dense() const { return !dense.empty(); }
  bool dense_is_bias() const { return has_dense() && dense.dtype() != DType::boolean; }
  bool has_alibi() const { return !alibi_slopes.empty(); }
  std::string describe() const;  // "none", "causal", "causal-br+padding+window+alibi+bias", ...
};

// How the sequences of a batch lie in memory for the kernels that read them as
// FlashAttention does. The tensors of AttentionInputs stay padded [B,H,S,D] either way.
struct Layout {
  // Variable lengths (flash_attn_varlen_func, a KV cache's seqused_k): sequence b has
  // q_lens[b] query rows and kv_lens[b] keys, at most Shape's q_len and kv_len. Rows and keys
  // past a sequence's lengths do not exist: nothing is computed, compared or counted there,
  // and bottom-right alignment uses the sequence's own kv_lens[b] - q_lens[b]. Packed, the
  // sequences lie back to back: q [sum q_lens, H, D] with cu_seqlens_q, k and v likewise.
  // Empty: every sequence has Shape's lengths.
  std::vector<std::int32_t> q_lens, kv_lens;
  // Paged KV cache (vLLM, FlashAttention's block_table): K and V in blocks of block_size keys,
  // [num_blocks, block_size, Hkv, D]; logical block p of sequence b is physical block
  // block_table[b * max_blocks + p]. block_size 0: not paged.
  std::int64_t block_size = 0, num_blocks = 0, max_blocks = 0;
  std::vector<std::int32_t> block_table;

  bool varlen() const { return !q_lens.empty(); }
  bool paged() const { return block_size > 0; }
  std::string describe() const;  // "", "varlen", "paged=16", "varlen+paged=16"
};

struct Problem {
  Shape shape;
  DType dtype = DType::f16;  // element type of q, k, v as the kernels get them
  double scale = 0;          // multiplies q.k; 1/sqrt(D) unless the case says otherwise
  // > 0: scores are soft-capped before the mask's bias, s = softcap * tanh(scale q.k / softcap)
  // (Gemma 2, FlashAttention's softcap). 0: none.
  double softcap = 0;
  Mask mask;
  Layout layout;

  // Query rows and keys of sequence b (Shape's lengths unless varlen).
  std::int64_t q_len_of(std::int64_t b) const;
  std::int64_t kv_len_of(std::int64_t b) const;
  // Sk - Sq of sequence b: the offset of bottom-right alignment (causal-br, window, ALiBi).
  std::int64_t diagonal_of(std::int64_t b) const { return kv_len_of(b) - q_len_of(b); }
  std::string describe_mask() const;  // the mask parts, softcap and layout: "causal+softcap=30+varlen"
};

struct AttentionInputs {
  Problem problem;
  HostTensor q, k, v;  // in problem.dtype; padded (zeros) past each sequence's lengths
  std::string source;  // "seed 7, dist normal" or the file the case came from
};

// Additive term for one score: 0 when attended, -inf when masked (or when row i or key j
// does not exist in sequence b), or the bias (dense bias plus ALiBi). The one place the
// reference learns which keys are attended and with what bias.
double mask_bias(const Problem& problem, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j);

// Throws fc::Error naming `origin` if shapes, dtypes, mask parts or the layout disagree.
void validate(const AttentionInputs& in, const std::string& origin);
// The checks of validate() that need no tensor: the problem's own consistency.
void validate_problem(const Problem& problem, const std::string& origin);

double default_scale(std::int64_t head_dim);

// ALiBi's standard slopes for `heads` heads (Press et al.; FlashAttention's tests):
// 2^(-8 (h + 1) / n) over the nearest power of two n, interleaved beyond it.
std::vector<double> standard_alibi_slopes(std::int64_t heads);

}  // namespace fc

#include "harness/io/sdpa_report.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/numeric.h"
#include "core/resource_usage.h"
#include "harness/io/npz.h"
#include "harness/io/printable.h"

namespace fc {
namespace {

using Arrays = std::map<std::string, NpyArray>;

const NpyArray* find(const Arrays& arrays, const std::string& name) {
  const auto it = arrays.find(name);
  return it == arrays.end() ? nullptr : &it->second;
}

// q, k, v as the kernels get them: fp16, bf16 (uint16 bits + dtype note) or fp32; of rank 4
// ([B,H,S,D], or a paged cache [blocks, block_size, Hkv, D]) or 3 (packed [total, H, D]).
HostTensor read_qkv(const std::string& path, const Arrays& arrays, const std::string& name, bool bf16, int rank,
                    const char* layout) {
  const NpyArray* a = find(arrays, name);
  if (!a) {
    std::string held;
    for (const auto& [key, array] : arrays) held += (held.empty() ? "" : ", ") + key;
    throw file_error(path, "missing array '" + name + "': a bug report in PyTorch SDPA form holds q, k, v as [B,H,S,D]; " +
                               (held.empty() ? std::string("this archive holds no array") : "this archive holds " + held));
  }
  if (a->is_text) throw file_error(path, "'" + name + "' is text, expected a " + layout + " array");
  const HostTensor& t = a->tensor;
  if (t.rank() != rank) {
    throw file_error(path, "'" + name + "' has shape " + dims_string(t.dims()) + ", expected rank " +
                               std::to_string(rank) + " " + layout);
  }
  if (bf16) {
    if (t.dtype() != DType::u16) {
      throw file_error(path, "'" + name + "' is " + dtype_name(t.dtype()) + " but dtype says bfloat16 (uint16 bits)");
    }
    HostTensor out(DType::bf16, t.dims());
    std::copy_n(static_cast<const std::uint8_t*>(t.data()), t.nbytes(), static_cast<std::uint8_t*>(out.data()));
    return out;
  }
  if (t.dtype() != DType::f16 && t.dtype() != DType::f32) {
    throw file_error(path, "'" + name + "' has dtype " + dtype_name(t.dtype()) +
                               "; expected float16, float32, or uint16 with dtype='bfloat16'");
  }
  return t;
}

bool read_bf16_note(const std::string& path, const Arrays& arrays) {
  const NpyArray* note = find(arrays, "dtype");
  if (!note) return false;
  if (!note->is_text) throw file_error(path, "'dtype' must be a string such as 'bfloat16'");
  if (note->text == "bfloat16") return true;
  if (note->text == "float16" || note->text == "float32") return false;
  throw file_error(path, "'dtype' is '" + note->text + "'; expected bfloat16, float16 or float32");
}

double read_scalar(const std::string& path, const NpyArray& a, const std::string& name) {
  if (a.is_text) throw file_error(path, "'" + name + "' must be a single number, got the text '" + printable(a.text) + "'");
  if (a.tensor.numel() != 1) {
    throw file_error(path, "'" + name + "' must be a single number, got shape " + dims_string(a.tensor.dims()));
  }
  return a.tensor.get(0);
}

// An integer array of `rank` (int32 or int64), its values as int64.
std::vector<std::int64_t> read_integers(const std::string& path, const Arrays& arrays, const std::string& name,
                                        int rank, Dims* dims = nullptr) {
  const NpyArray* a = find(arrays, name);
  if (!a) return {};
  const HostTensor& t = a->tensor;
  if (a->is_text || (t.dtype() != DType::i32 && t.dtype() != DType::i64) || t.rank() != rank) {
    throw file_error(path, "'" + name + "' must be an int32 array of rank " + std::to_string(rank) + ", got " +
                               (a->is_text ? std::string("text") : std::string(dtype_name(t.dtype())) + " " + dims_string(t.dims())));
  }
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(t.get(i));
  if (dims) *dims = t.dims();
  return v;
}

// attn_mask broadcast to [Bm,Hm,Sq,Sk] as PyTorch aligns trailing dims.
HostTensor read_mask(const std::string& path, const NpyArray& a, const Shape& s) {
  if (a.is_text) throw file_error(path, "'attn_mask' is text, expected a bool or float array");
  const HostTensor& t = a.tensor;
  if (t.rank() < 2 || t.rank() > 4) {
    throw file_error(path, "'attn_mask' has shape " + dims_string(t.dims()) + "; expected rank 2 to 4 broadcasting to " +
                               dims_string({s.batch, s.heads, s.q_len, s.kv_len}));
  }
  Dims d(static_cast<std::size_t>(4 - t.rank()), 1);
  d.insert(d.end(), t.dims().begin(), t.dims().end());
  const DType type = t.dtype();
  if (type != DType::boolean && type != DType::f16 && type != DType::f32 && type != DType::f64) {
    throw file_error(path, std::string("'attn_mask' has dtype ") + dtype_name(type) + "; expected bool or float");
  }
  // Float masks are used as fp32, the format the kernels read them in.
  HostTensor mask = type == DType::boolean ? t.reshaped(d) : t.reshaped(d).to(DType::f32);
  // PyTorch broadcasts a query or key dimension of 1 ([B,1,1,Sk]: a key padding mask); the
  // problem holds [Bm,Hm,Sq,Sk], so such a dimension is repeated here. Other shapes are left to
  // the problem's check, which names them.
  const bool rows_broadcast = d[2] == 1 && s.q_len != 1, keys_broadcast = d[3] == 1 && s.kv_len != 1;
  if ((!rows_broadcast && !keys_broadcast) || (d[2] != 1 && d[2] != s.q_len) || (d[3] != 1 && d[3] != s.kv_len)) return mask;
  const double bytes = static_cast<double>(d[0] * d[1]) * static_cast<double>(s.q_len) * static_cast<double>(s.kv_len) *
                       static_cast<double>(dtype_size(mask.dtype()));
  if (bytes > static_cast<double>(physical_host_bytes()) / 2) {
    throw file_error(path, "'attn_mask' of shape " + dims_string(t.dims()) + " broadcast to " +
                               dims_string({d[0], d[1], s.q_len, s.kv_len}) + " needs " + number_text(bytes / (1 << 30)) +
                               " GiB, more than half this machine's memory");
  }
  HostTensor full(mask.dtype(), {d[0], d[1], s.q_len, s.kv_len});
  for (std::int64_t m = 0; m < d[0] * d[1]; ++m) {
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      for (std::int64_t j = 0; j < s.kv_len; ++j) {
        const std::int64_t from = (m * d[2] + (rows_broadcast ? 0 : i)) * d[3] + (keys_broadcast ? 0 : j);
        full.set((m * s.q_len + i) * s.kv_len + j, mask.get(from));
      }
    }
  }
  return full;
}

// Sequence lengths from flash_attn_varlen_func's cu_seqlens: [B + 1], from 0, never
// decreasing (an empty sequence repeats its offset), ending at the packed total.
std::vector<std::int32_t> lengths_of(const std::string& path, const std::vector<std::int64_t>& cu, const char* name,
                                     std::int64_t total) {
  if (cu.size() < 2) throw file_error(path, std::string("'") + name + "' needs B + 1 offsets, got " + std::to_string(cu.size()));
  if (cu.front() != 0) throw file_error(path, std::string("'") + name + "' must start at 0, got " + std::to_string(cu.front()));
  std::vector<std::int32_t> lengths;
  for (std::size_t b = 1; b < cu.size(); ++b) {
    if (cu[b] < cu[b - 1]) {
      throw file_error(path, std::string("'") + name + "' is not increasing: " + std::to_string(cu[b - 1]) + " then " +
                                 std::to_string(cu[b]) + " at " + std::to_string(b));
    }
    lengths.push_back(static_cast<std::int32_t>(cu[b] - cu[b - 1]));
  }
  if (cu.back() != total) {
    throw file_error(path, std::string("'") + name + "' ends at " + std::to_string(cu.back()) + ", but the packed tensor has " +
                               std::to_string(total) + " rows");
  }
  return lengths;
}

// Row r of head h of a packed [rows, H, D] (or cache-as-rows) tensor into row `to` of head h of
// batch b of a padded [B,H,S,D] one.
void unpack_row(const HostTensor& rows, std::int64_t r, std::int64_t h, HostTensor& padded, std::int64_t b, std::int64_t to) {
  const Dims& d = padded.dims();
  const std::size_t width = dtype_size(padded.dtype()) * static_cast<std::size_t>(d[3]);
  std::memcpy(static_cast<std::uint8_t*>(padded.data()) + (((b * d[1] + h) * d[2] + to) * d[3]) * dtype_size(padded.dtype()),
              static_cast<const std::uint8_t*>(rows.data()) + ((r * d[1] + h) * d[3]) * dtype_size(padded.dtype()), width);
}

HostTensor unpack(const HostTensor& packed, const std::vector<std::int32_t>& lengths, std::int64_t max_len) {
  const Dims& d = packed.dims();
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  HostTensor out(packed.dtype(), {batch, d[1], max_len, d[2]});
  std::int64_t first = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < d[1]; ++h)
      for (std::int64_t r = 0; r < lengths[static_cast<std::size_t>(b)]; ++r) unpack_row(packed, first + r, h, out, b, r);
    first += lengths[static_cast<std::size_t>(b)];
  }
  return out;
}

std::int64_t longest(const std::vector<std::int32_t>& lengths) {
  return std::max<std::int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
}

void check_heads(const std::string& path, std::int64_t q_heads, std::int64_t kv_heads) {
  if (kv_heads < 1 || q_heads % kv_heads != 0) {
    throw file_error(path, "q has " + std::to_string(q_heads) + " heads and k " + std::to_string(kv_heads) +
                               ": query heads must be a multiple of K/V heads (GQA)");
  }
}

}  // namespace

AttentionInputs read_sdpa_report(const std::string& path) {
  const Arrays arrays = read_npz(path);
  const bool bf16 = read_bf16_note(path, arrays);
  AttentionInputs in;
  Problem& p = in.problem;
  Layout& layout = p.layout;
  const std::vector<std::int64_t> cu_q = read_integers(path, arrays, "cu_seqlens_q", 1);
  const std::vector<std::int64_t> cu_k = read_integers(path, arrays, "cu_seqlens_k", 1);
  Dims table_dims;
  const std::vector<std::int64_t> table = read_integers(path, arrays, "block_table", 2, &table_dims);
  const std::vector<std::int64_t> seqused_k = read_integers(path, arrays, "seqused_k", 1);
  const bool packed_q = !cu_q.empty(), paged = !table.empty();
  const bool packed_kv = !cu_k.empty() && !paged;

  // q: [B,H,Sq,D] or packed [total_q, H, D].
  HostTensor q = read_qkv(path, arrays, "q", bf16, packed_q ? 3 : 4, packed_q ? "[total_q,H,D]" : "[B,H,S,D]");
  const std::int64_t heads = q.dim(1), head_dim = q.dims().back();
  std::vector<std::int32_t> q_lens, kv_lens;
  if (packed_q) q_lens = lengths_of(path, cu_q, "cu_seqlens_q", q.dim(0));
  const std::int64_t batch = packed_q ? static_cast<std::int64_t>(q_lens.size()) : q.dim(0);

  // k, v: [B,Hkv,Sk,D], packed [total_k, Hkv, D], or the paged cache [blocks, block_size, Hkv, D].
  const char* kv_layout = paged ? "[num_blocks,block_size,Hkv,D]" : packed_kv ? "[total_k,Hkv,D]" : "[B,Hkv,S,D]";
  HostTensor k = read_qkv(path, arrays, "k", bf16, packed_kv ? 3 : 4, kv_layout);
  HostTensor v = read_qkv(path, arrays, "v", bf16, packed_kv ? 3 : 4, kv_layout);
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) {
    throw file_error(path, std::string("q, k, v must share one dtype, got ") + dtype_name(q.dtype()) + ", " +
                               dtype_name(k.dtype()) + ", " + dtype_name(v.dtype()));
  }
  if (v.dims() != k.dims()) throw file_error(path, "k " + dims_string(k.dims()) + " and v " + dims_string(v.dims()) + " differ");
  const std::int64_t kv_heads = k.dim(paged ? 2 : 1);
  if (k.dims().back() != head_dim) {
    throw file_error(path, "q " + dims_string(q.dims()) + " and k " + dims_string(k.dims()) + " disagree in D");
  }
  check_heads(path, heads, kv_heads);

  if (paged) {
    if (table_dims[0] != batch) {
      throw file_error(path, "'block_table' has " + std::to_string(table_dims[0]) + " rows for batch " + std::to_string(batch));
    }
    if (static_cast<std::int64_t>(seqused_k.size()) != batch) {
      throw file_error(path, "'seqused_k' (the keys of each sequence in the cache) must give one length per batch");
    }
    layout.block_size = k.dim(1);
    layout.num_blocks = k.dim(0);
    layout.max_blocks = table_dims[1];
    for (std::int64_t e : table) layout.block_table.push_back(static_cast<std::int32_t>(e));
    for (std::int64_t len : seqused_k) {
      if (len < 0 || len > layout.max_blocks * layout.block_size) {
        throw file_error(path, "'seqused_k' length " + std::to_string(len) + " outside [0, " +
                                   std::to_string(layout.max_blocks * layout.block_size) + "]");
      }
      kv_lens.push_back(static_cast<std::int32_t>(len));
    }
  } else if (packed_kv) {
    kv_lens = lengths_of(path, cu_k, "cu_seqlens_k", k.dim(0));
    if (static_cast<std::int64_t>(kv_lens.size()) != batch) {
      throw file_error(path, "'cu_seqlens_k' gives " + std::to_string(kv_lens.size()) + " sequences and q " + std::to_string(batch));
    }
  } else if (k.dim(0) != batch) {
    throw file_error(path, "q " + dims_string(q.dims()) + " and k " + dims_string(k.dims()) + " disagree in B");
  }

  const bool varlen = packed_q || packed_kv || paged;
  const std::int64_t q_len = packed_q ? longest(q_lens) : q.dim(2);
  const std::int64_t kv_len = varlen && !kv_lens.empty() ? longest(kv_lens) : k.dim(2);
  p.shape = {batch, heads, q_len, kv_len, head_dim, kv_heads};
  if (varlen) {
    if (q_lens.empty()) q_lens.assign(static_cast<std::size_t>(batch), static_cast<std::int32_t>(q_len));
    if (kv_lens.empty()) kv_lens.assign(static_cast<std::size_t>(batch), static_cast<std::int32_t>(kv_len));
    layout.q_lens = q_lens;
    layout.kv_lens = kv_lens;
  }
  p.dtype = q.dtype();
  p.scale = default_scale(head_dim);
  if (const NpyArray* a = find(arrays, "scale")) p.scale = read_scalar(path, *a, "scale");
  validate_problem(p, path);  // the block table's entries before they are followed

  in.q = packed_q ? unpack(q, q_lens, q_len) : q;
  if (paged) {
    in.k = HostTensor(k.dtype(), {batch, kv_heads, kv_len, head_dim});
    in.v = HostTensor(k.dtype(), {batch, kv_heads, kv_len, head_dim});
    const HostTensor k_rows = k.reshaped({layout.num_blocks * layout.block_size, kv_heads, head_dim});
    const HostTensor v_rows = v.reshaped({layout.num_blocks * layout.block_size, kv_heads, head_dim});
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t j = 0; j < kv_lens[static_cast<std::size_t>(b)]; ++j) {
        const std::int64_t row = layout.block_table[static_cast<std::size_t>(b * layout.max_blocks + j / layout.block_size)] *
                                     layout.block_size + j % layout.block_size;
        for (std::int64_t h = 0; h < kv_heads; ++h) {
          unpack_row(k_rows, row, h, in.k, b, j);
          unpack_row(v_rows, row, h, in.v, b, j);
        }
      }
  } else {
    in.k = packed_kv ? unpack(k, kv_lens, kv_len) : k;
    in.v = packed_kv ? unpack(v, kv_lens, kv_len) : v;
  }

  if (const NpyArray* a = find(arrays, "is_causal")) {
    const double causal = read_scalar(path, *a, "is_causal");
    if (causal != 0 && causal != 1) {
      throw file_error(path, "'is_causal' must be a bool (or 0 or 1), got " + std::to_string(causal));
    }
    if (causal == 1) p.mask.causal = Causal::top_left;
  }
  if (const NpyArray* a = find(arrays, "softcap")) {
    p.softcap = read_scalar(path, *a, "softcap");
    if (!(p.softcap > 0)) throw file_error(path, "'softcap' must be positive, got " + std::to_string(p.softcap));
  }
  const std::vector<std::int64_t> window = read_integers(path, arrays, "window_size", 1);
  if (find(arrays, "window_size")) {
    if (window.size() != 2) throw file_error(path, "'window_size' must be (left, right)");
    if (window[0] < -1 || window[1] < -1) {
      throw file_error(path, "'window_size' (" + std::to_string(window[0]) + ", " + std::to_string(window[1]) +
                                 "): each side must be >= 0, or -1 for unbounded");
    }
    p.mask.window = {window[0], window[1]};
  }
  if (const NpyArray* a = find(arrays, "alibi_slopes")) {
    if (a->is_text || a->tensor.rank() != 1 || !is_floating(a->tensor.dtype())) {
      throw file_error(path, "'alibi_slopes' must be a float array [H]");
    }
    for (std::int64_t h = 0; h < a->tensor.numel(); ++h) p.mask.alibi_slopes.push_back(a->tensor.get(h));
  }
  if (const NpyArray* a = find(arrays, "attn_mask")) p.mask.dense = read_mask(path, *a, p.shape);
  in.source = path;
  validate(in, path);
  return in;
}

}  // namespace fc

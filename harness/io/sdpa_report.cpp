#include "harness/io/sdpa_report.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "harness/io/npz.h"

namespace fc {
namespace {

using Arrays = std::map<std::string, NpyArray>;

const NpyArray* find(const Arrays& arrays, const std::string& name) {
  const auto it = arrays.find(name);
  return it == arrays.end() ? nullptr : &it->second;
}

// q, k, v as the kernels get them: fp16, bf16 (uint16 bits + dtype note) or fp32.
HostTensor read_qkv(const std::string& path, const Arrays& arrays, const std::string& name, bool bf16) {
  const NpyArray* a = find(arrays, name);
  if (!a) {
    std::string held;
    for (const auto& [key, array] : arrays) held += (held.empty() ? "" : ", ") + key;
    throw file_error(path, "missing array '" + name + "': a bug report in PyTorch SDPA form holds q, k, v as [B,H,S,D]; " +
                               (held.empty() ? std::string("this archive holds no array") : "this archive holds " + held));
  }
  if (a->is_text) throw file_error(path, "'" + name + "' is text, expected a [B,H,S,D] array");
  const HostTensor& t = a->tensor;
  if (t.rank() != 4) {
    throw file_error(path, "'" + name + "' has shape " + dims_string(t.dims()) + ", expected rank 4 [B,H,S,D]");
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
  if (a.is_text || a.tensor.numel() != 1) {
    throw file_error(path, "'" + name + "' must be a single number, got shape " + dims_string(a.tensor.dims()));
  }
  return a.tensor.get(0);
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
  return type == DType::boolean ? t.reshaped(d) : t.reshaped(d).to(DType::f32);
}

}  // namespace

AttentionInputs read_sdpa_report(const std::string& path) {
  const Arrays arrays = read_npz(path);
  const bool bf16 = read_bf16_note(path, arrays);
  AttentionInputs in;
  in.q = read_qkv(path, arrays, "q", bf16);
  in.k = read_qkv(path, arrays, "k", bf16);
  in.v = read_qkv(path, arrays, "v", bf16);
  if (in.q.dtype() != in.k.dtype() || in.q.dtype() != in.v.dtype()) {
    throw file_error(path, std::string("q, k, v must share one dtype, got ") + dtype_name(in.q.dtype()) + ", " +
                               dtype_name(in.k.dtype()) + ", " + dtype_name(in.v.dtype()));
  }
  const Dims& q = in.q.dims();
  const Dims& k = in.k.dims();
  if (in.v.dims() != k) {
    throw file_error(path, "k " + dims_string(k) + " and v " + dims_string(in.v.dims()) + " differ");
  }
  if (q[0] != k[0] || q[1] != k[1] || q[3] != k[3]) {
    throw file_error(path, "q " + dims_string(q) + " and k " + dims_string(k) + " disagree in B, H or D");
  }
  Problem& p = in.problem;
  p.shape = {q[0], q[1], q[2], k[2], q[3]};
  p.dtype = in.q.dtype();
  p.scale = default_scale(p.shape.head_dim);
  if (const NpyArray* a = find(arrays, "scale")) p.scale = read_scalar(path, *a, "scale");
  if (const NpyArray* a = find(arrays, "is_causal")) {
    if (read_scalar(path, *a, "is_causal") != 0) p.mask.causal = Causal::top_left;
  }
  if (const NpyArray* a = find(arrays, "attn_mask")) p.mask.dense = read_mask(path, *a, p.shape);
  in.source = path;
  validate(in, path);
  return in;
}

}  // namespace fc

#include "harness/io/case_file.h"

#include <algorithm>
#include <ctime>
#include <set>

#include "core/error.h"
#include "harness/version.h"
#include "stages/device_info.h"

namespace fc {
namespace {

const char* causal_name(Causal c) {
  switch (c) {
    case Causal::none: return "none";
    case Causal::top_left: return "top_left";
    case Causal::bottom_right: return "bottom_right";
  }
  return "none";
}

Causal parse_causal(const std::string& path, const std::string& s) {
  if (s == "none") return Causal::none;
  if (s == "top_left") return Causal::top_left;
  if (s == "bottom_right") return Causal::bottom_right;
  throw file_error(path, "/meta: unknown causal mode '" + s + "'");
}

template <class T>
T required(const std::string& path, const std::optional<T>& value, const std::string& what) {
  if (!value) throw file_error(path, what + ": missing attribute");
  return *value;
}

HostTensor read_input(const H5Reader& in, const std::string& name, DType dtype, const Dims& dims) {
  const std::string object = "/inputs/" + name;
  if (!in.exists(object)) throw file_error(in.path(), object + ": missing dataset");
  HostTensor t = in.read_tensor(object);
  if (t.dtype() != dtype) {
    throw file_error(in.path(), object + ": dtype " + dtype_name(t.dtype()) + ", /meta says " + dtype_name(dtype));
  }
  if (t.dims() != dims) {
    throw file_error(in.path(), object + ": shape " + dims_string(t.dims()) + ", /meta says " + dims_string(dims));
  }
  return t;
}

}  // namespace

std::string utc_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

void write_header(H5Writer& out, const std::string& kind, const std::string& command,
                  const CaseDescription& d, const AttentionInputs& inputs) {
  out.set_attribute("/", "schema", "flashcore-check");
  out.set_attribute("/", "schema_version", kSchemaVersion);
  out.set_attribute("/", "kind", kind);
  out.ensure_group("/meta");
  const DeviceInfo device = device_info();
  out.set_attribute("/meta", "tool_version", tool_version());
  out.set_attribute("/meta", "git_revision", git_revision());
  out.set_attribute("/meta", "time", utc_time_now());
  out.set_attribute("/meta", "command", command);
  out.set_attribute("/meta", "device_name", device.available ? device.name : "none");
  out.set_attribute("/meta", "sm", device.available ? std::to_string(device.sm_major) + "." + std::to_string(device.sm_minor)
                                                    : std::string());
  out.set_attribute("/meta", "driver", device.driver);
  out.set_attribute("/meta", "cuda_runtime", device.runtime);
  out.set_attribute("/meta", "cublaslt", device.cublaslt);
  const Shape& s = inputs.problem.shape;
  out.set_attribute("/meta", "shape", std::vector<std::int64_t>{s.batch, s.heads, s.q_len, s.kv_len, s.head_dim});
  out.set_attribute("/meta", "dtype", dtype_name(inputs.problem.dtype));
  out.set_attribute("/meta", "scale", inputs.problem.scale);
  out.set_attribute("/meta", "causal", causal_name(inputs.problem.mask.causal));
  const Problem& p = inputs.problem;
  out.set_attribute("/meta", "kv_heads", s.kv_head_count());
  out.set_attribute("/meta", "softcap", p.softcap);
  out.set_attribute("/meta", "window", std::vector<std::int64_t>{p.mask.window.left, p.mask.window.right});
  if (p.layout.paged()) {
    out.set_attribute("/meta", "block_size", p.layout.block_size);
    out.set_attribute("/meta", "num_blocks", p.layout.num_blocks);
  }
  out.set_attribute("/meta", "mask", d.mask.empty() ? inputs.problem.mask.describe() : d.mask);
  out.set_attribute("/meta", "dist", d.dist);
  out.set_attribute("/meta", "seed", d.seed ? static_cast<std::int64_t>(*d.seed) : std::int64_t{-1});
  out.set_attribute("/meta", "source", inputs.source);
  out.set_attribute("/meta", "label", d.label);
}

void write_inputs(H5Writer& out, const AttentionInputs& inputs) {
  out.write_tensor("/inputs/q", inputs.q);
  out.write_tensor("/inputs/k", inputs.k);
  out.write_tensor("/inputs/v", inputs.v);
  const Mask& m = inputs.problem.mask;
  if (!m.key_lengths.empty()) {
    HostTensor lengths(DType::i32, {static_cast<std::int64_t>(m.key_lengths.size())});
    for (std::size_t i = 0; i < m.key_lengths.size(); ++i) lengths.set(static_cast<std::int64_t>(i), m.key_lengths[i]);
    out.write_tensor("/inputs/key_lengths", lengths);
  }
  if (m.has_dense()) out.write_tensor("/inputs/mask", m.dense);
  if (m.has_alibi()) {
    HostTensor slopes(DType::f64, {static_cast<std::int64_t>(m.alibi_slopes.size())});
    for (std::size_t h = 0; h < m.alibi_slopes.size(); ++h) slopes.set(static_cast<std::int64_t>(h), m.alibi_slopes[h]);
    out.write_tensor("/inputs/alibi_slopes", slopes);
  }
  const Layout& l = inputs.problem.layout;
  auto int32s = [&out](const std::string& name, const std::vector<std::int32_t>& v, Dims dims) {
    HostTensor t(DType::i32, std::move(dims));
    for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
    out.write_tensor(name, t);
  };
  if (l.varlen()) {
    int32s("/inputs/q_lens", l.q_lens, {static_cast<std::int64_t>(l.q_lens.size())});
    int32s("/inputs/kv_lens", l.kv_lens, {static_cast<std::int64_t>(l.kv_lens.size())});
  }
  if (l.paged()) int32s("/inputs/block_table", l.block_table, {inputs.problem.shape.batch, l.max_blocks});
}

void write_reference(H5Writer& out, const ReferenceTensors& r, const ReferenceOptions& options) {
  out.write_tensor("/reference/full/scores", r.scores);
  out.write_tensor("/reference/full/probs", r.probs);
  out.write_tensor("/reference/full/row_max", r.row_max);
  out.write_tensor("/reference/full/row_sum", r.row_sum);
  out.write_tensor("/reference/full/lse", r.lse);
  out.write_tensor("/reference/full/output", r.output);
  if (options.page_width > 0) {
    out.write_tensor("/reference/paged/row_max", r.page_max);
    out.write_tensor("/reference/paged/row_sum", r.page_sum);
    out.write_tensor("/reference/paged/rescale", r.page_rescale);
    out.write_tensor("/reference/paged/acc", r.page_acc);
    out.write_tensor("/reference/paged/output", r.paged_output);
  }
  if (options.splits > 0) {
    out.write_tensor("/reference/split/lse", r.split_lse);
    out.write_tensor("/reference/split/output", r.split_output);
    out.write_tensor("/reference/split/combined", r.combined_output);
  }
  write_reference_extras(out, r.masked_rows, options);
}

void write_reference_extras(H5Writer& out, const std::vector<MaskedRow>& masked_rows, const ReferenceOptions& options) {
  HostTensor masked(DType::i64, {static_cast<std::int64_t>(masked_rows.size()), 3});
  for (std::size_t i = 0; i < masked_rows.size(); ++i) {
    masked.set(static_cast<std::int64_t>(3 * i), static_cast<double>(masked_rows[i].b));
    masked.set(static_cast<std::int64_t>(3 * i + 1), static_cast<double>(masked_rows[i].h));
    masked.set(static_cast<std::int64_t>(3 * i + 2), static_cast<double>(masked_rows[i].row));
  }
  out.write_tensor("/reference/full/masked_rows", masked);
  if (options.page_width > 0) out.set_attribute("/reference/paged", "page_width", options.page_width);
  if (options.splits > 0) {
    out.set_attribute("/reference/split", "splits", options.splits);
    out.set_attribute("/reference/split", "tile_width", options.page_width > 0 ? options.page_width : 64);
  }
}

namespace {

// The mask parts that only attributes and datasets carry, as `--mask` and Mask::describe()
// name them ("padding=40,300" names padding).
std::set<std::string> recorded_parts(const std::string& mask) {
  static const std::set<std::string> kinds{"causal", "causal-br", "padding", "window", "alibi"};
  std::set<std::string> parts;
  std::size_t start = 0;
  while (start <= mask.size()) {
    const std::size_t plus = std::min(mask.find('+', start), mask.size());
    const std::string part = mask.substr(start, plus - start);
    const std::string kind = part.substr(0, part.find('='));
    if (kinds.count(kind)) parts.insert(kind);
    start = plus + 1;
  }
  return parts;
}

// /meta mask against the mask the attributes and datasets give: a dataset missing or damaged
// (key_lengths, alibi_slopes) would otherwise read as another mask, and a replay would find a
// mask mismatch that is not the implementation's.
void check_mask_record(const std::string& path, const std::string& recorded, const Mask& read) {
  // A dense mask may carry those parts itself: masked-bias=V folds causal, padding and window
  // into one finite bias (harness/inputs.cpp), and the record keeps the spec it came from.
  if (read.has_dense()) return;
  const std::set<std::string> said = recorded_parts(recorded), found = recorded_parts(read.describe());
  if (said != found) {
    throw file_error(path, "/meta mask '" + recorded + "' but the file's mask attributes and datasets give '" +
                               read.describe() + "' (a dataset missing or damaged?)");
  }
}

}  // namespace

CaseFile read_case_file(const H5Reader& in) {
  const std::string& path = in.path();
  const std::optional<std::string> schema = in.string_attribute("/", "schema");
  if (!schema) throw file_error(path, "not a flashcore-check file (no schema attribute)");
  if (*schema != "flashcore-check") throw file_error(path, "not a flashcore-check file (schema '" + *schema + "')");
  const std::int64_t version = required(path, in.int_attribute("/", "schema_version"), "/ schema_version");
  if (version > kSchemaVersion) {
    throw file_error(path, "schema version " + std::to_string(version) + " is newer than this tool's " +
                               std::to_string(kSchemaVersion) + ": update flashcore-check");
  }
  if (version < 1) throw file_error(path, "/ schema_version: " + std::to_string(version) + " (versions start at 1)");
  if (!in.exists("/meta")) throw file_error(path, "/meta: missing group");
  CaseFile f;
  f.kind = required(path, in.string_attribute("/", "kind"), "/ kind");
  // Ours, and python/flashcore_capture.py's (a bug report, with or without the kernel's outputs).
  const std::set<std::string> kinds{"snapshot", "fixture", "reference", "report", "capture"};
  if (!kinds.count(f.kind)) {
    throw file_error(path, "/ kind: '" + f.kind + "' is none of snapshot, fixture, reference, report, capture");
  }
  const std::vector<std::int64_t> shape = required(path, in.int_list_attribute("/meta", "shape"), "/meta shape");
  if (shape.size() != 5) throw file_error(path, "/meta shape: expected [B,H,Sq,Sk,D]");
  for (std::int64_t d : shape) {
    if (d < 1 || d > (std::int64_t{1} << 24)) throw file_error(path, "/meta shape: dimension " + std::to_string(d) + " out of range");
  }
  Problem& p = f.inputs.problem;
  p.shape = {shape[0], shape[1], shape[2], shape[3], shape[4]};
  const std::string dtype = required(path, in.string_attribute("/meta", "dtype"), "/meta dtype");
  const std::optional<DType> t = parse_dtype(dtype);
  if (!t || (*t != DType::f16 && *t != DType::bf16 && *t != DType::f32)) {
    throw file_error(path, "/meta dtype: '" + dtype + "' is not fp16, bf16 or fp32");
  }
  p.dtype = *t;
  p.scale = required(path, in.double_attribute("/meta", "scale"), "/meta scale");
  p.mask.causal = parse_causal(path, required(path, in.string_attribute("/meta", "causal"), "/meta causal"));
  // Version 2: GQA, softcap, window, ALiBi, varlen, paged KV; each absent in version 1 files.
  p.shape.kv_heads = in.int_attribute("/meta", "kv_heads").value_or(0);
  if (p.shape.kv_heads < 0 || p.shape.kv_heads > p.shape.heads) throw file_error(path, "/meta kv_heads: out of range");
  p.softcap = in.double_attribute("/meta", "softcap").value_or(0);
  if (const auto window = in.int_list_attribute("/meta", "window")) {
    if (window->size() != 2) throw file_error(path, "/meta window: expected [left, right]");
    p.mask.window = {(*window)[0], (*window)[1]};
  }
  const Shape& s = p.shape;
  f.inputs.q = read_input(in, "q", p.dtype, {s.batch, s.heads, s.q_len, s.head_dim});
  f.inputs.k = read_input(in, "k", p.dtype, {s.batch, s.kv_head_count(), s.kv_len, s.head_dim});
  f.inputs.v = read_input(in, "v", p.dtype, {s.batch, s.kv_head_count(), s.kv_len, s.head_dim});
  auto int32s = [&](const std::string& name, const Dims& dims) {
    const HostTensor t = in.read_tensor(name);
    if (t.dtype() != DType::i32 || t.dims() != dims) throw file_error(path, name + ": expected int32 " + dims_string(dims));
    std::vector<std::int32_t> v;
    for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<std::int32_t>(t.get(i)));
    return v;
  };
  if (in.exists("/inputs/alibi_slopes")) {
    const HostTensor slopes = in.read_tensor("/inputs/alibi_slopes");
    if (slopes.rank() != 1 || !is_floating(slopes.dtype())) throw file_error(path, "/inputs/alibi_slopes: expected float [H]");
    for (std::int64_t h = 0; h < slopes.numel(); ++h) p.mask.alibi_slopes.push_back(slopes.get(h));
  }
  if (in.exists("/inputs/q_lens") || in.exists("/inputs/kv_lens")) {
    p.layout.q_lens = int32s("/inputs/q_lens", {s.batch});
    p.layout.kv_lens = int32s("/inputs/kv_lens", {s.batch});
  }
  if (in.exists("/inputs/block_table")) {
    const HostTensor table = in.read_tensor("/inputs/block_table");
    if (table.rank() != 2 || table.dim(0) != s.batch) throw file_error(path, "/inputs/block_table: expected int32 [B, max_blocks]");
    p.layout.max_blocks = table.dim(1);
    p.layout.block_table = int32s("/inputs/block_table", table.dims());
    p.layout.block_size = required(path, in.int_attribute("/meta", "block_size"), "/meta block_size");
    p.layout.num_blocks = required(path, in.int_attribute("/meta", "num_blocks"), "/meta num_blocks");
    if (p.layout.block_size < 1 || p.layout.block_size > (1 << 20)) throw file_error(path, "/meta block_size: out of range");
  }
  if (in.exists("/inputs/key_lengths")) {
    const HostTensor lengths = in.read_tensor("/inputs/key_lengths");
    if (lengths.dtype() != DType::i32 || lengths.dims() != Dims{s.batch}) {
      throw file_error(path, "/inputs/key_lengths: expected int32 [" + std::to_string(s.batch) + "]");
    }
    for (std::int64_t b = 0; b < s.batch; ++b) p.mask.key_lengths.push_back(static_cast<std::int32_t>(lengths.get(b)));
  }
  if (in.exists("/inputs/mask")) p.mask.dense = in.read_tensor("/inputs/mask");
  f.inputs.source = in.string_attribute("/meta", "source").value_or(path);
  validate(f.inputs, path);

  CaseDescription& d = f.description;
  d.label = in.string_attribute("/meta", "label").value_or(s.to_string());
  d.shape = s;
  d.dtype = p.dtype;
  d.mask = in.string_attribute("/meta", "mask").value_or(p.mask.describe());
  check_mask_record(path, d.mask, p.mask);
  d.dist = in.string_attribute("/meta", "dist").value_or("");
  d.source = f.inputs.source;
  const std::int64_t seed = in.int_attribute("/meta", "seed").value_or(-1);
  if (seed >= 0) d.seed = static_cast<std::uint64_t>(seed);
  d.scale = p.scale;
  return f;
}

}  // namespace fc

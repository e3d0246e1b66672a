#include "harness/io/capture_file.h"

#include <algorithm>

#include "core/error.h"
#include "harness/io/h5_file.h"
#include "harness/io/npz.h"

namespace fc {
namespace {

// The arrays of an SDPA report (harness/io/sdpa_report.h), FlashAttention's arguments
// included: read as the inputs.
const std::vector<std::string>& report_names() {
  static const std::vector<std::string> names{"q",           "k",           "v",            "attn_mask",    "scale",
                                              "is_causal",   "dtype",       "window_size",  "softcap",      "alibi_slopes",
                                              "cu_seqlens_q", "cu_seqlens_k", "block_table", "seqused_k"};
  return names;
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string known_names() {
  std::string s = "a report holds ";
  for (const std::string& n : report_names()) s += n + ", ";
  s += "a capture adds ";
  for (const std::string& n : capture_output_names()) s += n + ", ";
  return s + "impl, tile_width";
}

void check_output_dtype(const std::string& path, const std::string& name, const HostTensor& t) {
  const DType d = t.dtype();
  if (d != DType::f16 && d != DType::bf16 && d != DType::f32) {
    throw file_error(path, "'" + name + "' has dtype " + dtype_name(d) +
                               "; captured outputs are float16, bfloat16 or float32");
  }
}

std::int64_t tile_width_of(const std::string& path, double value) {
  if (!(value >= 1 && value <= (1 << 24)) || value != static_cast<double>(static_cast<std::int64_t>(value))) {
    throw file_error(path, "'tile_width' must be a whole number of keys, 1 or more");
  }
  return static_cast<std::int64_t>(value);
}

void read_npz_outputs(const std::string& path, CaptureFile& f) {
  const std::map<std::string, NpyArray> arrays = read_npz(path);
  const auto note = arrays.find("dtype");
  const bool bf16 = note != arrays.end() && note->second.is_text && note->second.text == "bfloat16";
  for (const auto& [name, array] : arrays) {
    if (listed(report_names(), name)) continue;
    if (name == "impl") {
      if (!array.is_text) throw file_error(path, "'impl' must be a string (the kernel's name)");
      f.impl = array.text;
      continue;
    }
    if (name == "tile_width") {
      if (array.is_text || array.tensor.numel() != 1) throw file_error(path, "'tile_width' must be a single number");
      f.tile_width = tile_width_of(path, array.tensor.get(0));
      continue;
    }
    if (!listed(capture_output_names(), name)) {
      throw file_error(path, "unknown array '" + name + "' (" + known_names() + ")");
    }
    if (array.is_text) throw file_error(path, "'" + name + "' is text, expected an array");
    HostTensor t = array.tensor;
    if (t.dtype() == DType::u16) {
      if (!bf16) throw file_error(path, "'" + name + "' is uint16 but no dtype = 'bfloat16' says it holds bfloat16 bits");
      HostTensor b(DType::bf16, t.dims());
      std::copy_n(static_cast<const std::uint8_t*>(t.data()), t.nbytes(), static_cast<std::uint8_t*>(b.data()));
      t = std::move(b);
    }
    check_output_dtype(path, name, t);
    f.outputs[name] = std::move(t);
  }
}

void read_h5_outputs(const std::string& path, CaptureFile& f) {
  const H5Reader in(path);
  if (!f.inputs) {  // an outputs-only file still carries the schema's header
    const std::optional<std::string> schema = in.string_attribute("/", "schema");
    if (!schema || *schema != "flashcore-check") throw file_error(path, "not a flashcore-check file (no schema attribute)");
  }
  if (!in.exists("/outputs")) return;
  for (const std::string& name : in.children("/outputs")) {
    if (!listed(capture_output_names(), name)) {
      throw file_error(path, "/outputs/" + name + ": unknown output (a capture holds " + known_names() + ")");
    }
    HostTensor t = in.read_tensor("/outputs/" + name);
    check_output_dtype(path, "/outputs/" + name, t);
    f.outputs[name] = std::move(t);
  }
  f.impl = in.string_attribute("/outputs", "impl").value_or("");
  if (const std::optional<std::int64_t> w = in.int_attribute("/outputs", "tile_width")) {
    f.tile_width = tile_width_of(path, static_cast<double>(*w));
  }
}

}  // namespace

const std::vector<std::string>& capture_output_names() {
  static const std::vector<std::string> names{"scores", "probs", "row_max", "row_sum", "partial_out",
                                              "partial_lse", "out", "lse"};
  return names;
}

bool capture_holds_inputs(const std::string& path) {
  switch (file_form(path)) {
    case FileForm::npz: return read_npz(path).count("q") > 0;
    case FileForm::hdf5: return H5Reader(path).exists("/inputs/q");
    case FileForm::unknown: break;
  }
  throw file_error(path, "neither a .npz archive nor an HDF5 file");
}

CaptureFile read_capture_file(const std::string& path) {
  CaptureFile f;
  f.path = path;
  const FileForm form = file_form(path);
  if (form == FileForm::unknown) throw file_error(path, "neither a .npz archive nor an HDF5 file");
  if (capture_holds_inputs(path)) f.inputs = load_case(path);
  if (form == FileForm::npz) {
    read_npz_outputs(path, f);
  } else {
    read_h5_outputs(path, f);
  }
  return f;
}

}  // namespace fc

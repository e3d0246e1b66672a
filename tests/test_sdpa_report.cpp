// Bug reports in PyTorch SDPA form (.npz): what is accepted, and one clear line for what is not.
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "harness/inputs.h"
#include "harness/io/npz.h"
#include "harness/io/npy.h"
#include "harness/io/sdpa_report.h"
#include "harness/io/zip_archive.h"

namespace fc {
namespace {

std::string temp_path(const std::string& name) { return "/tmp/fc_test_" + name; }

std::map<std::string, HostTensor> report_arrays(DType dtype = DType::f16) {
  CaseSpec spec;
  spec.shape = {2, 3, 5, 7, 64};
  spec.dtype = dtype == DType::f32 ? DType::f16 : dtype;
  const AttentionInputs in = generate_inputs(spec);
  return {{"q", in.q.to(dtype)}, {"k", in.k.to(dtype)}, {"v", in.v.to(dtype)}};
}

HostTensor scalar(DType t, double v) {
  HostTensor s(t, {});
  s.set(0, v);
  return s;
}

// The message of the fc::Error `path` raises, which must be one line naming the file.
std::string error_of(const std::string& path) {
  try {
    read_sdpa_report(path);
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.rfind(path + ": ", 0) == 0);
    CHECK(m.find('\n') == std::string::npos);
    return m;
  }
  FAIL("no error for " << path);
  return "";
}

}  // namespace

TEST_CASE("an SDPA report with q, k, v, a broadcast mask, scale and is_causal loads", "[report]") {
  auto arrays = report_arrays();
  HostTensor mask(DType::boolean, {5, 7});  // [Sq, Sk], broadcast over B and H
  for (std::int64_t i = 0; i < mask.numel(); ++i) mask.set(i, i % 3 != 0);
  arrays["attn_mask"] = mask;
  arrays["scale"] = scalar(DType::f64, 0.25);
  arrays["is_causal"] = scalar(DType::boolean, 1);
  const std::string path = temp_path("report.npz");
  write_npz(path, arrays);
  const AttentionInputs in = read_sdpa_report(path);
  CHECK(in.problem.shape == Shape{2, 3, 5, 7, 64});
  CHECK(in.problem.dtype == DType::f16);
  CHECK(in.problem.scale == 0.25);
  CHECK(in.problem.mask.causal == Causal::top_left);
  CHECK(in.problem.mask.dense.dims() == Dims{1, 1, 5, 7});
  CHECK(mask_bias(in.problem, 1, 2, 4, 2) == -INFINITY);  // masked by the bool mask
  CHECK(mask_bias(in.problem, 1, 2, 4, 4) == 0);
  CHECK(mask_bias(in.problem, 1, 2, 2, 4) == -INFINITY);  // by causality
  std::remove(path.c_str());
}

TEST_CASE("bfloat16 arrives as uint16 with a dtype note, float masks as fp32 bias", "[report]") {
  // Written by tests/data/make_sdpa_reports.py: q = (i + d) / 8, k = (2 - j + d) / 8,
  // v = (j d) / 8 in bf16 bits, mask [3,3] with -inf at (0,2) and 0.5 at (1,0), scale 0.5.
  const AttentionInputs in = read_sdpa_report(FC_TEST_DATA_DIR "/sdpa_bf16.npz");
  CHECK(in.problem.dtype == DType::bf16);
  CHECK(in.problem.shape == Shape{1, 2, 3, 3, 4});
  CHECK(in.problem.scale == 0.5);
  CHECK(in.q.get(((0 * 2 + 1) * 3 + 2) * 4 + 3) == (2 + 3) / 8.0);
  CHECK(in.k.get(1 * 4 + 0) == (2 - 1 + 0) / 8.0);
  CHECK(in.v.get(2 * 4 + 3) == (2 * 3) / 8.0);
  CHECK(in.problem.mask.dense.dtype() == DType::f32);
  CHECK(mask_bias(in.problem, 0, 1, 0, 2) == -INFINITY);
  CHECK(mask_bias(in.problem, 0, 0, 1, 0) == 0.5);

  // Without the note, uint16 arrays are no input format.
  auto arrays = report_arrays(DType::bf16);  // write_npz stores bf16 as '<u2'
  const std::string path = temp_path("bf16.npz");
  write_npz(path, arrays);
  CHECK(error_of(path).find("uint16") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("float32 reports are kept in fp32 for the reference", "[report]") {
  const std::string path = temp_path("f32.npz");
  write_npz(path, report_arrays(DType::f32));
  CHECK(read_sdpa_report(path).problem.dtype == DType::f32);
  std::remove(path.c_str());
}

TEST_CASE("bad reports give one line naming the file and the problem", "[report]") {
  const std::string path = temp_path("bad.npz");
  auto write = [&](std::map<std::string, HostTensor> a) { write_npz(path, a); };

  auto arrays = report_arrays();
  arrays.erase("k");
  write(arrays);
  CHECK(error_of(path).find("missing array 'k'") != std::string::npos);

  arrays = report_arrays();
  arrays["q"] = arrays["q"].reshaped({6, 5, 64});
  write(arrays);
  CHECK(error_of(path).find("rank 4") != std::string::npos);

  arrays = report_arrays();
  arrays["v"] = HostTensor(DType::f16, {2, 3, 8, 64});
  write(arrays);
  CHECK(error_of(path).find("differ") != std::string::npos);

  arrays = report_arrays();
  arrays["k"] = HostTensor(DType::f16, {2, 3, 7, 32});
  arrays["v"] = HostTensor(DType::f16, {2, 3, 7, 32});
  write(arrays);
  CHECK(error_of(path).find("disagree") != std::string::npos);

  arrays = report_arrays();
  arrays["q"] = arrays["q"].to(DType::i32);
  write(arrays);
  CHECK(error_of(path).find("dtype int32") != std::string::npos);

  arrays = report_arrays();
  arrays["attn_mask"] = HostTensor(DType::boolean, {4, 5, 7});
  write(arrays);
  CHECK(error_of(path).find("broadcast") != std::string::npos);

  arrays = report_arrays();
  arrays["scale"] = HostTensor(DType::f32, {2});
  write(arrays);
  CHECK(error_of(path).find("single number") != std::string::npos);

  arrays = report_arrays();
  arrays["is_causal"] = scalar(DType::f32, 0.5);  // not a flag: refused, not read as causal
  write(arrays);
  CHECK(error_of(path).find("'is_causal' must be a bool (or 0 or 1), got 0.5") != std::string::npos);

  {  // a text scale, as np.savez(scale="abc") writes it: a '<U3' array of shape ()
    ZipWriter zip(path);
    std::vector<std::vector<std::uint8_t>> headers;
    const auto good = report_arrays();
    for (const auto& [name, tensor] : good) {
      const std::vector<std::uint8_t>& header = headers.emplace_back(npy_header(tensor));
      zip.add(name + ".npy", {{header.data(), header.size()}, {tensor.data(), tensor.nbytes()}});
    }
    std::string text_header = "{'descr': '<U3', 'fortran_order': False, 'shape': (), }";
    text_header.append(64 - (10 + text_header.size() + 1) % 64, ' ');
    text_header += '\n';
    std::vector<std::uint8_t> image = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<std::uint8_t>(text_header.size()),
                                       static_cast<std::uint8_t>(text_header.size() >> 8)};
    image.insert(image.end(), text_header.begin(), text_header.end());
    for (char c : std::string("abc")) image.insert(image.end(), {static_cast<std::uint8_t>(c), 0, 0, 0});  // UTF-32LE
    zip.add("scale.npy", {{image.data(), image.size()}});
    zip.finish();
  }
  CHECK(error_of(path).find("'scale' must be a single number, got the text 'abc'") != std::string::npos);

  std::ofstream(path) << "q,k,v\n1,2,3\n";
  CHECK(error_of(path).find("not a .npz archive") != std::string::npos);
  std::remove(path.c_str());
  CHECK(error_of(path).find(path) == 0);
}

}  // namespace fc

// `flashcore-check reference` streams its tensors block of rows by block: the file must be the
// one the whole-head computation writes, dataset for dataset, and H5Writer's blocks must land
// where they are put.
#include <cmath>
#include <filesystem>
#include <string>

#include "catch.h"
#include "harness/inputs.h"
#include "harness/io/case_file.h"
#include "harness/io/h5_file.h"
#include "harness/io/streamed_reference.h"
#include "reference/attention.h"

namespace fc {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) { return (fs::temp_directory_path() / name).string(); }

}  // namespace

TEST_CASE("H5Writer blocks land at their offsets, and a block outside the dataset is refused", "[hdf5]") {
  const std::string path = temp_path("fc_blocks.h5");
  {
    H5Writer out(path);
    out.create_dataset("/t", DType::f64, {2, 3, 4});
    HostTensor block(DType::f64, {1, 2, 4});
    for (std::int64_t i = 0; i < 8; ++i) block.set(i, static_cast<double>(i + 1));
    out.write_block("/t", {1, 1, 0}, block);
    std::string message;
    try {
      out.write_block("/t", {1, 2, 0}, block);
    } catch (const std::exception& e) {
      message = e.what();
    }
    CHECK(message.find("lies outside the dataset") != std::string::npos);
    out.commit();
  }
  const HostTensor t = H5Reader(path).read_tensor("/t");
  REQUIRE(t.dims() == Dims{2, 3, 4});
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const std::int64_t a = i / 12, r = i / 4 % 3;
    const double expected = a == 1 && r >= 1 ? static_cast<double>((r - 1) * 4 + i % 4 + 1) : 0.0;
    CHECK(t.get(i) == expected);
  }
  fs::remove(path);
}

TEST_CASE("the streamed reference file equals the whole-head one, with pages, splits and masked rows", "[reference]") {
  CaseSpec spec;
  spec.shape = {2, 2, 37, 50, 16};
  spec.mask = "masked-rows";
  spec.seed = 5;
  const AttentionInputs in = generate_inputs(spec);
  const ReferenceOptions options{16, 3};
  const std::string whole = temp_path("fc_ref_whole.h5"), streamed = temp_path("fc_ref_streamed.h5");
  const ReferenceTensors t = compute_reference(in, options);
  {
    H5Writer out(whole);
    write_reference(out, t, options);
    out.commit();
  }
  std::vector<MaskedRow> masked;
  {
    H5Writer out(streamed);
    masked = write_reference_streamed(out, in, options, 1 << 10);  // a tiny budget: blocks of a few rows
    out.commit();
  }
  REQUIRE(!t.masked_rows.empty());
  CHECK(masked.size() == t.masked_rows.size());
  const H5Reader a(whole), b(streamed);
  for (const std::string group : {"/reference/full", "/reference/paged", "/reference/split"}) {
    REQUIRE(a.children(group) == b.children(group));
    for (const std::string& name : a.children(group)) {
      const HostTensor x = a.read_tensor(group + "/" + name), y = b.read_tensor(group + "/" + name);
      INFO(group << "/" << name);
      REQUIRE(x.dims() == y.dims());
      REQUIRE(x.dtype() == y.dtype());
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        const double u = x.get(i), v = y.get(i);
        if (u == v || (std::isnan(u) && std::isnan(v))) continue;
        REQUIRE(std::fabs(u - v) <= 1e-13 * std::max(std::fabs(u), std::fabs(v)));  // GEMM blocking only
      }
    }
  }
  CHECK(b.int_attribute("/reference/paged", "page_width") == 16);
  CHECK(b.int_attribute("/reference/split", "splits") == 3);
  fs::remove(whole);
  fs::remove(streamed);
}

}  // namespace fc

// The HDF5 module: round trips, the storage schema, atomic output, error messages on bad
// input, robustness against corrupted files, and what h5dump and h5py see.
#include <hdf5.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "core/check.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "harness/io/h5_file.h"

// HDF5 1.10 loses a block (about 424 bytes) each time an object header fails its checksum
// (an error path of its metadata cache), which the corrupted-file test does hundreds of
// times. libhdf5 has no frame pointers, so LeakSanitizer's stacks end in the library and
// the suppression has to name the whole library. Open identifiers, the leak our code
// could cause, are counted by that test itself.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5\n"; }

namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "fc-h5-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The fc::Error message of f(), or a marker saying what happened instead.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fc::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not an fc::Error: ") + e.what() + ">";
  }
  return "<no error>";
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool file_exists(const std::string& path) { return fs::exists(fs::symlink_status(path)); }

std::vector<std::string> directory_listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

template <class T>
void put_bits(fc::HostTensor& t, std::int64_t i, T bits) {
  std::memcpy(static_cast<char*>(t.data()) + i * static_cast<std::int64_t>(sizeof(T)), &bits, sizeof(T));
}

// Random bit patterns with the special values of the dtype first: infinities, NaNs with
// payloads and both signs, -0, the smallest subnormal, the largest finite, integer limits.
fc::HostTensor patterned_tensor(fc::DType dtype, const fc::Dims& dims, std::uint64_t seed) {
  fc::HostTensor t(dtype, dims);
  fc::Rng rng(seed);
  auto* bytes = static_cast<std::uint8_t*>(t.data());
  for (std::size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<std::uint8_t>(rng.next() >> 56);
  const std::int64_t n = t.numel();
  auto place = [&](auto specials) {
    for (std::int64_t i = 0; i < n && i < static_cast<std::int64_t>(specials.size()); ++i) {
      put_bits(t, i, specials[static_cast<std::size_t>(i)]);
    }
  };
  switch (dtype) {
    case fc::DType::f16:
      place(std::vector<std::uint16_t>{0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x8000, 0x0001, 0x7BFF});
      break;
    case fc::DType::bf16:
      place(std::vector<std::uint16_t>{0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF, 0x8000, 0x0001, 0x7F7F});
      break;
    case fc::DType::f32:
      place(std::vector<std::uint32_t>{0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu,
                                       0x80000000u, 0x00000001u, 0x7F7FFFFFu});
      break;
    case fc::DType::f64:
      place(std::vector<std::uint64_t>{0x7FF0000000000000ull, 0xFFF0000000000000ull, 0x7FF8000000000000ull,
                                       0x7FF0000000000001ull, 0xFFFFFFFFFFFFFFFFull, 0x8000000000000000ull,
                                       1ull});
      break;
    case fc::DType::boolean:
      for (std::int64_t i = 0; i < n; ++i) bytes[i] = bytes[i] & 1;
      break;
    case fc::DType::i32:
      place(std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(),
                                      std::numeric_limits<std::int32_t>::max(), 0, -1});
      break;
    case fc::DType::i64:
      place(std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(),
                                      std::numeric_limits<std::int64_t>::max(), 0, -1});
      break;
    case fc::DType::u8: place(std::vector<std::uint8_t>{0, 255}); break;
    case fc::DType::u16: place(std::vector<std::uint16_t>{0, 65535}); break;
  }
  return t;
}

bool same_bits(const fc::HostTensor& a, const fc::HostTensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

const std::vector<fc::DType> kAllDtypes = {fc::DType::f16, fc::DType::bf16, fc::DType::f32,
                                           fc::DType::f64, fc::DType::boolean, fc::DType::i32,
                                           fc::DType::i64, fc::DType::u8, fc::DType::u16};

// Ranks 0 to 4, then empty tensors (which HDF5 stores contiguous).
const std::vector<fc::Dims> kShapes = {{}, {7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 5}, {0}, {2, 0, 3}};

fc::HostTensor tensor_from_bits(fc::DType dtype, const fc::Dims& dims, const std::vector<std::uint16_t>& bits) {
  fc::HostTensor t(dtype, dims);
  std::memcpy(t.data(), bits.data(), t.nbytes());
  return t;
}

fc::HostTensor bool_tensor(const fc::Dims& dims, const std::vector<std::uint8_t>& values) {
  fc::HostTensor t(fc::DType::boolean, dims);
  std::memcpy(t.data(), values.data(), t.nbytes());
  return t;
}

// ----- Raw HDF5, for files our writer would never produce ---------------------------------

fc::H5Handle raw_create(const std::string& path) {
  fc::silence_hdf5_error_printing();
  return fc::H5Handle(FC_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)), fc::H5Kind::file);
}

fc::H5Handle raw_open(const std::string& path) {
  fc::silence_hdf5_error_printing();
  return fc::H5Handle(FC_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)), fc::H5Kind::file);
}

void raw_dataset(hid_t file, const char* name, hid_t file_type, const std::vector<hsize_t>& dims,
                 hid_t memory_type = H5I_INVALID_HID, const void* data = nullptr, hid_t space_id = H5I_INVALID_HID) {
  fc::H5Handle space;
  if (space_id < 0) {
    space = fc::H5Handle(FC_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)),
                         fc::H5Kind::dataspace);
    space_id = space.get();
  }
  fc::H5Handle lcpl(FC_H5(H5Pcreate(H5P_LINK_CREATE)), fc::H5Kind::property_list);
  FC_H5(H5Pset_create_intermediate_group(lcpl.get(), 1));
  fc::H5Handle dataset(FC_H5(H5Dcreate2(file, name, file_type, space_id, lcpl.get(), H5P_DEFAULT, H5P_DEFAULT)),
                       fc::H5Kind::dataset);
  if (data != nullptr) FC_H5(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

void raw_fixed_string_attribute(hid_t file, const char* object, const char* name, const std::string& bytes,
                                H5T_str_t padding) {
  fc::H5Handle type(FC_H5(H5Tcopy(H5T_C_S1)), fc::H5Kind::datatype);
  FC_H5(H5Tset_size(type.get(), bytes.size()));
  FC_H5(H5Tset_strpad(type.get(), padding));
  fc::H5Handle space(FC_H5(H5Screate(H5S_SCALAR)), fc::H5Kind::dataspace);
  fc::H5Handle attribute(
      FC_H5(H5Acreate_by_name(file, object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
      fc::H5Kind::attribute);
  FC_H5(H5Awrite(attribute.get(), type.get(), bytes.data()));
}

struct Layout {
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  std::vector<hsize_t> chunk;
  std::vector<H5Z_filter_t> filters;
  std::vector<unsigned> deflate_level;
};

Layout layout_of(const std::string& file_path, const std::string& dataset_path) {
  fc::H5Handle file = raw_open(file_path);
  fc::H5Handle dataset(FC_H5(H5Dopen2(file.get(), dataset_path.c_str(), H5P_DEFAULT)), fc::H5Kind::dataset);
  fc::H5Handle dcpl(FC_H5(H5Dget_create_plist(dataset.get())), fc::H5Kind::property_list);
  Layout result;
  result.layout = H5Pget_layout(dcpl.get());
  if (result.layout == H5D_CHUNKED) {
    result.chunk.resize(H5S_MAX_RANK);
    const int rank = FC_H5(H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, result.chunk.data()));
    result.chunk.resize(static_cast<std::size_t>(rank));
  }
  const int filters = FC_H5(H5Pget_nfilters(dcpl.get()));
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t count = 4;
    unsigned values[4] = {};
    char name[64];
    const H5Z_filter_t id = FC_H5(H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &count, values,
                                                 sizeof name, name, &config));
    result.filters.push_back(id);
    if (id == H5Z_FILTER_DEFLATE && count > 0) result.deflate_level.push_back(values[0]);
  }
  return result;
}

// Open files and objects in them (groups, datasets, attributes, named datatypes), to see
// that failing reads leave none behind. HDF5 1.10 offers no public count of open
// dataspaces, transient datatypes or property lists (H5Inmembers refuses library types).
ssize_t open_object_count() { return FC_H5(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL)); }

// ----- Running tools --------------------------------------------------------------------

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

CommandResult run_command(const std::string& command, const std::string& output_file) {
  const int status = std::system((command + " >" + shell_quote(output_file) + " 2>&1").c_str());
  CommandResult result;
  result.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  result.output = read_text(output_file);
  return result;
}

// The first of /usr/bin/python3 and python3 (from PATH) that imports h5py and numpy.
std::string python_with_h5py() {
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import h5py, numpy' >/dev/null 2>&1";
    const int status = std::system(probe.c_str());
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return candidate;
  }
  return "";
}

constexpr const char* kNoPython =
    "no Python with h5py and numpy: tried /usr/bin/python3 and python3 on PATH; "
    "install python3-h5py (and python3-numpy) to run this interop test";

const std::string kInteropScript = std::string(FC_SOURCE_DIR) + "/tests/interop/check_h5_module.py";

// The values tests/interop/check_h5_module.py expects, bit for bit.
const std::vector<std::uint16_t> kInteropHalfBits = {0x3800, 0xBE00, 0x4000, 0x7BFF, 0x8000, 0x0400};  // [[0.5,-1.5,2],[65504,-0,2^-14]]
const std::vector<std::uint16_t> kInteropBf16Bits = {0x3F80, 0xC000, 0x7F80, 0x0001};  // 1, -2, inf, min subnormal

}  // namespace

// =======================================================================================

TEST_CASE("Every dtype survives a round trip bit for bit at ranks 0 to 4 and when empty", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("roundtrip.h5");
  std::vector<std::pair<std::string, fc::HostTensor>> written;
  {
    fc::H5Writer writer(path);
    std::uint64_t seed = 1;
    for (fc::DType dtype : kAllDtypes) {
      for (const fc::Dims& dims : kShapes) {
        const std::string name = std::string("/roundtrip/") + fc::dtype_name(dtype) + "/" +
                                 std::to_string(dims.size()) + "d" + fc::dims_string(dims);
        fc::HostTensor t = patterned_tensor(dtype, dims, seed++);
        writer.write_tensor(name, t);
        written.emplace_back(name, std::move(t));
      }
    }
    writer.commit();
  }
  fc::H5Reader reader(path);
  for (const auto& [name, expected] : written) {
    INFO(name);
    const fc::HostTensor got = reader.read_tensor(name);
    CHECK(got.dtype() == expected.dtype());
    CHECK(got.dims() == expected.dims());
    CHECK(same_bits(got, expected));
  }
}

TEST_CASE("A multi-megabyte tensor is split into chunks of at most 1 MiB and reads back whole", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("big.h5");
  const fc::HostTensor big = patterned_tensor(fc::DType::f32, {4, 3, 300, 600}, 11);  // 8.6 MB
  const fc::HostTensor long_row = patterned_tensor(fc::DType::f64, {1, 1, 1, 1 << 18}, 12);  // 2 MiB
  {
    fc::H5Writer writer(path);
    writer.write_tensor("/big", big);
    writer.write_tensor("/long_row", long_row);
    writer.commit();
  }
  const Layout big_layout = layout_of(path, "/big");
  CHECK(big_layout.layout == H5D_CHUNKED);
  CHECK(big_layout.chunk == std::vector<hsize_t>{1, 1, 300, 600});  // 4->1, 3->2->1: 720 KB
  const Layout row_layout = layout_of(path, "/long_row");
  CHECK(row_layout.chunk == std::vector<hsize_t>{1, 1, 1, 1 << 17});  // exactly 1 MiB

  fc::H5Reader reader(path);
  CHECK(same_bits(reader.read_tensor("/big"), big));
  CHECK(same_bits(reader.read_tensor("/long_row"), long_row));
}

TEST_CASE("The storage schema: IEEE half for fp16, tagged uint16 and uint8 for bf16 and bool", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("schema.h5");
  {
    fc::H5Writer writer(path);
    for (fc::DType dtype : kAllDtypes) {
      writer.write_tensor(std::string("/") + fc::dtype_name(dtype), patterned_tensor(dtype, {2, 3}, 5));
    }
    writer.write_tensor("/scalar", patterned_tensor(fc::DType::f32, {}, 6));
    writer.write_tensor("/empty", patterned_tensor(fc::DType::f32, {4, 0}, 7));
    writer.commit();
  }
  fc::H5Handle file = raw_open(path);
  auto type_of = [&](const char* name) {
    fc::H5Handle dataset(FC_H5(H5Dopen2(file.get(), name, H5P_DEFAULT)), fc::H5Kind::dataset);
    return fc::H5Handle(FC_H5(H5Dget_type(dataset.get())), fc::H5Kind::datatype);
  };

  SECTION("fp16 is a 2-byte IEEE float with h5py's field layout") {
    fc::H5Handle type = type_of("/fp16");
    CHECK(H5Tget_class(type.get()) == H5T_FLOAT);
    CHECK(H5Tget_size(type.get()) == 2);
    CHECK(H5Tget_precision(type.get()) == 16);
    CHECK(H5Tget_order(type.get()) == H5T_ORDER_LE);
    std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    FC_H5(H5Tget_fields(type.get(), &spos, &epos, &esize, &mpos, &msize));
    CHECK(std::vector<std::size_t>{spos, epos, esize, mpos, msize} == std::vector<std::size_t>{15, 10, 5, 0, 10});
    CHECK(H5Tget_ebias(type.get()) == 15);
  }
  SECTION("the other dtypes use the standard little-endian types") {
    const std::vector<std::pair<const char*, hid_t>> expected = {
        {"/bf16", H5T_STD_U16LE}, {"/bool", H5T_STD_U8LE},  {"/fp32", H5T_IEEE_F32LE},
        {"/fp64", H5T_IEEE_F64LE}, {"/int32", H5T_STD_I32LE}, {"/int64", H5T_STD_I64LE},
        {"/uint8", H5T_STD_U8LE}, {"/uint16", H5T_STD_U16LE}};
    for (const auto& [name, standard] : expected) {
      INFO(name);
      CHECK(H5Tequal(type_of(name).get(), standard) > 0);
    }
  }
  SECTION("bf16 and bool carry a dtype attribute; the others carry none") {
    fc::H5Reader reader(path);
    CHECK(reader.string_attribute("/bf16", "dtype") == "bfloat16");
    CHECK(reader.string_attribute("/bool", "dtype") == "bool");
    CHECK(reader.string_attribute("/uint16", "dtype") == std::nullopt);
    CHECK(reader.string_attribute("/fp16", "dtype") == std::nullopt);
  }
  SECTION("arrays are chunked with shuffle and deflate 4; scalars and empty arrays are contiguous") {
    const Layout small = layout_of(path, "/fp16");
    CHECK(small.layout == H5D_CHUNKED);
    CHECK(small.chunk == std::vector<hsize_t>{2, 3});
    CHECK(small.filters == std::vector<H5Z_filter_t>{H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE});
    CHECK(small.deflate_level == std::vector<unsigned>{4});
    CHECK(layout_of(path, "/scalar").layout == H5D_CONTIGUOUS);
    CHECK(layout_of(path, "/scalar").filters.empty());
    CHECK(layout_of(path, "/empty").layout == H5D_CONTIGUOUS);
  }
}

TEST_CASE("Attributes of every kind round trip on the root, groups and datasets", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("attributes.h5");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  {
    fc::H5Writer writer(path);
    writer.ensure_group("/meta");
    writer.write_tensor("/stages/qk/data", patterned_tensor(fc::DType::f32, {2, 2}, 3));
    writer.set_attribute("/", "tool", std::string("flashcore-check"));
    writer.set_attribute("/", "empty_text", std::string());
    writer.set_attribute("/meta", "note", "µ-scaled, ✓ UTF-8");
    writer.set_attribute("/meta", "seed", std::int64_t{-7});
    writer.set_attribute("/meta", "int_min", std::numeric_limits<std::int64_t>::min());
    writer.set_attribute("/meta", "int_max", std::numeric_limits<std::int64_t>::max());
    writer.set_attribute("/meta", "plain_int", 3);  // int literal: stored as int64
    writer.set_attribute("/meta", "size", std::size_t{12});
    writer.set_attribute("/meta", "scale", 0.125);
    writer.set_attribute("/meta", "nan", nan);
    writer.set_attribute("/meta", "minus_inf", -inf);
    writer.set_attribute("/meta", "shape", std::vector<std::int64_t>{2, 4, 128, 64});
    writer.set_attribute("/meta", "no_ints", std::vector<std::int64_t>{});
    writer.set_attribute("/meta", "tolerances", std::vector<double>{1e-3, -0.0, inf});
    writer.set_attribute("/meta", "no_doubles", std::vector<double>{});
    writer.set_attribute("/stages/qk/data", "scale", 0.5);
    writer.set_attribute("/meta", "long", std::string(10000, 'x'));  // a global heap collection of its own
    writer.set_attribute("/meta", "label", std::string("first"));
    writer.set_attribute("/meta", "label", std::string("second"));  // leaves a hole in the heap
    writer.set_attribute("/meta", "replaced", std::string("first a string"));
    writer.set_attribute("/meta", "replaced", 2.5);  // replaced by a double
    writer.commit();
  }
  fc::H5Reader reader(path);
  CHECK(reader.path() == path);
  CHECK(reader.string_attribute("/", "tool") == "flashcore-check");
  CHECK(reader.string_attribute("/", "empty_text") == "");
  CHECK(reader.string_attribute("/meta", "note") == "µ-scaled, ✓ UTF-8");
  CHECK(reader.int_attribute("/meta", "seed") == -7);
  CHECK(reader.int_attribute("/meta", "int_min") == std::numeric_limits<std::int64_t>::min());
  CHECK(reader.int_attribute("/meta", "int_max") == std::numeric_limits<std::int64_t>::max());
  CHECK(reader.int_attribute("/meta", "plain_int") == 3);
  CHECK(reader.int_attribute("/meta", "size") == 12);
  CHECK(reader.double_attribute("/meta", "scale") == 0.125);
  CHECK(std::isnan(reader.double_attribute("/meta", "nan").value()));
  CHECK(reader.double_attribute("/meta", "minus_inf") == -inf);
  CHECK(reader.int_list_attribute("/meta", "shape") == std::vector<std::int64_t>{2, 4, 128, 64});
  CHECK(reader.int_list_attribute("/meta", "no_ints") == std::vector<std::int64_t>{});
  const std::vector<double> tolerances = reader.double_list_attribute("/meta", "tolerances").value();
  REQUIRE(tolerances.size() == 3);
  CHECK(tolerances[0] == 1e-3);
  CHECK(std::signbit(tolerances[1]));
  CHECK(tolerances[2] == inf);
  CHECK(reader.double_list_attribute("/meta", "no_doubles") == std::vector<double>{});
  CHECK(reader.double_attribute("/stages/qk/data", "scale") == 0.5);
  CHECK(reader.double_attribute("/meta", "replaced") == 2.5);
  CHECK(reader.string_attribute("/meta", "long") == std::string(10000, 'x'));
  CHECK(reader.string_attribute("/meta", "label") == "second");

  SECTION("integers read as doubles and one-element lists; a scalar reads as a one-element list") {
    CHECK(reader.double_attribute("/meta", "seed") == -7.0);
    CHECK(reader.double_list_attribute("/meta", "shape") == std::vector<double>{2, 4, 128, 64});
    CHECK(reader.int_list_attribute("/meta", "seed") == std::vector<std::int64_t>{-7});
  }
  SECTION("an absent attribute is nullopt") {
    CHECK(reader.string_attribute("/meta", "absent") == std::nullopt);
    CHECK(reader.int_attribute("/", "absent") == std::nullopt);
    CHECK(reader.double_attribute("/stages/qk/data", "absent") == std::nullopt);
    CHECK(reader.int_list_attribute("/meta", "absent") == std::nullopt);
    CHECK(reader.double_list_attribute("/meta", "absent") == std::nullopt);
  }
  SECTION("a present attribute of another type or shape is an error naming it") {
    CHECK(error_of([&] { reader.int_attribute("/meta", "note"); }) ==
          path + ": /meta: attribute 'note': wrong type (string, expected integer)");
    CHECK(error_of([&] { reader.string_attribute("/meta", "seed"); }) ==
          path + ": /meta: attribute 'seed': wrong type (integer, expected string)");
    CHECK(error_of([&] { reader.int_attribute("/meta", "scale"); }) ==
          path + ": /meta: attribute 'scale': wrong type (float, expected integer)");
    CHECK(error_of([&] { reader.double_attribute("/meta", "note"); }) ==
          path + ": /meta: attribute 'note': wrong type (string, expected float)");
    CHECK(error_of([&] { reader.int_attribute("/meta", "shape"); }) ==
          path + ": /meta: attribute 'shape': holds 4 values, expected one");
    CHECK(error_of([&] { reader.int_list_attribute("/meta", "tolerances"); }) ==
          path + ": /meta: attribute 'tolerances': wrong type (float, expected integer)");
    CHECK(error_of([&] { reader.double_attribute("/meta", "int_max"); }) ==
          path + ": /meta: attribute 'int_max': integer value 9223372036854775807 is not exact as a double");
  }
  SECTION("an attribute of a missing object is an error, not nullopt") {
    CHECK(error_of([&] { reader.string_attribute("/nowhere/deeper", "x"); }) ==
          path + ": /nowhere/deeper: missing group or dataset");
  }
}

TEST_CASE("Fixed-length strings read back without their padding", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("fixed.h5");
  {
    fc::H5Handle file = raw_create(path);
    raw_fixed_string_attribute(file.get(), "/", "nullterm", std::string("abc\0\0", 5), H5T_STR_NULLTERM);
    raw_fixed_string_attribute(file.get(), "/", "nullpad", std::string("bfloat16\0\0", 10), H5T_STR_NULLPAD);
    raw_fixed_string_attribute(file.get(), "/", "spacepad", "bool    ", H5T_STR_SPACEPAD);
    raw_fixed_string_attribute(file.get(), "/", "full", "exact", H5T_STR_NULLPAD);
  }
  fc::H5Reader reader(path);
  CHECK(reader.string_attribute("/", "nullterm") == "abc");
  CHECK(reader.string_attribute("/", "nullpad") == "bfloat16");
  CHECK(reader.string_attribute("/", "spacepad") == "bool");
  CHECK(reader.string_attribute("/", "full") == "exact");
}

TEST_CASE("children() lists the links of a group sorted by name", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("children.h5");
  {
    fc::H5Writer writer(path);
    writer.write_tensor("/stages/softmax/data", patterned_tensor(fc::DType::f32, {1}, 1));
    writer.write_tensor("/stages/qk/data", patterned_tensor(fc::DType::f32, {1}, 2));
    writer.write_tensor("/stages/Zeta", patterned_tensor(fc::DType::f32, {1}, 3));
    writer.ensure_group("/stages/empty");
    writer.ensure_group("/stages/qk");  // already there: nothing changes
    writer.write_tensor("/inputs/q", patterned_tensor(fc::DType::f16, {1, 1, 2, 2}, 4));
    writer.commit();
  }
  fc::H5Reader reader(path);
  CHECK(reader.children("/") == std::vector<std::string>{"inputs", "stages"});
  CHECK(reader.children("/stages") == std::vector<std::string>{"Zeta", "empty", "qk", "softmax"});
  CHECK(reader.children("/stages/empty").empty());
  CHECK(error_of([&] { reader.children("/outputs"); }) == path + ": /outputs: missing group");
  CHECK(error_of([&] { reader.children("/inputs/q"); }) == path + ": /inputs/q: not a group");
}

TEST_CASE("exists() walks the path and is false for a missing middle group", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("exists.h5");
  {
    fc::H5Writer writer(path);
    writer.write_tensor("/inputs/q", patterned_tensor(fc::DType::f16, {2}, 1));
    writer.commit();
  }
  fc::H5Reader reader(path);
  CHECK(reader.exists("/"));
  CHECK(reader.exists("/inputs"));
  CHECK(reader.exists("/inputs/q"));
  CHECK_FALSE(reader.exists("/inputs/k"));
  CHECK_FALSE(reader.exists("/missing/middle/group"));
  CHECK_FALSE(reader.exists("/inputs/q/below_a_dataset"));
  CHECK(error_of([&] { reader.exists("inputs/q"); }) ==
        path + ": inputs/q: invalid object path (must be absolute, like /inputs/q)");
  CHECK(error_of([&] { reader.exists("/inputs//q"); }) ==
        path + ": /inputs//q: invalid object path (must be absolute, like /inputs/q)");
}

TEST_CASE("An exception before commit leaves neither the final nor the temporary file", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("aborted.h5");
  std::string temp_path;
  try {
    fc::H5Writer writer(path);
    const std::vector<std::string> staged = directory_listing(dir.path());
    REQUIRE(staged.size() == 1);  // the temporary file beside the final path, and nothing else
    CHECK(staged[0].rfind("aborted.h5.tmp-", 0) == 0);
    temp_path = dir.file(staged[0]);
    CHECK_FALSE(file_exists(path));
    writer.write_tensor("/inputs/q", patterned_tensor(fc::DType::f16, {4, 4}, 1));
    throw std::runtime_error("something failed mid-way");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(file_exists(temp_path));
  CHECK_FALSE(file_exists(path));
  CHECK(directory_listing(dir.path()).empty());
}

TEST_CASE("commit() replaces an existing file, which stays intact until then", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("replaced.h5");
  const fc::HostTensor first = patterned_tensor(fc::DType::f32, {3}, 1);
  const fc::HostTensor second = patterned_tensor(fc::DType::f32, {5}, 2);
  {
    fc::H5Writer writer(path);
    writer.write_tensor("/x", first);
    writer.commit();
  }
  {
    fc::H5Writer writer(path);
    writer.write_tensor("/x", second);
    CHECK(same_bits(fc::H5Reader(path).read_tensor("/x"), first));
    writer.commit();
    CHECK(error_of([&] { writer.write_tensor("/y", second); }) ==
          path + ": /y: cannot write (the file was already committed)");
  }
  CHECK(same_bits(fc::H5Reader(path).read_tensor("/x"), second));
  CHECK(directory_listing(dir.path()) == std::vector<std::string>{"replaced.h5"});

  SECTION("an aborted writer leaves the existing file as it was") {
    {
      fc::H5Writer writer(path);
      writer.write_tensor("/x", first);
    }
    CHECK(same_bits(fc::H5Reader(path).read_tensor("/x"), second));
    CHECK(directory_listing(dir.path()) == std::vector<std::string>{"replaced.h5"});
  }
}

TEST_CASE("A writer fails with the system's reason when the directory is missing or not writable", "[hdf5]") {
  TempDir dir;
  SECTION("a directory that does not exist") {
    const std::string path = dir.file("no/such/dir/out.h5");
    CHECK(error_of([&] { fc::H5Writer writer(path); }) ==
          path + ": cannot write (" + std::strerror(ENOENT) + ")");
  }
  SECTION("a parent that is a regular file") {
    write_bytes(dir.file("plain"), "text");
    const std::string path = dir.file("plain/out.h5");
    CHECK(error_of([&] { fc::H5Writer writer(path); }) ==
          path + ": cannot write (" + std::strerror(ENOTDIR) + ")");
  }
  SECTION("a directory where even root cannot create files") {
    const std::string path = "/proc/fc-check-h5-test-" + std::to_string(::getpid()) + ".h5";
    const std::string message = error_of([&] { fc::H5Writer writer(path); });
    INFO(message);
    CHECK(starts_with(message, path + ": cannot write ("));
    CHECK(message.back() == ')');
    CHECK_FALSE(file_exists(path + ".tmp-" + std::to_string(::getpid())));
  }
  SECTION("a read-only directory (only meaningful when not running as root)") {
    const std::string read_only = dir.file("read-only");
    fs::create_directory(read_only);
    fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string path = read_only + "/out.h5";
    if (::geteuid() != 0) {
      CHECK(error_of([&] { fc::H5Writer writer(path); }) == path + ": cannot write (" + std::strerror(EACCES) + ")");
    }
    fs::permissions(read_only, fs::perms::owner_all);
  }
  CHECK(directory_listing(dir.path()).size() <= 2);  // "plain", "read-only"; no temporary files
}

TEST_CASE("Writer misuse is an error naming the object", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("misuse.h5");
  fc::H5Writer writer(path);
  writer.write_tensor("/inputs/q", patterned_tensor(fc::DType::f16, {2}, 1));
  CHECK(error_of([&] { writer.write_tensor("/inputs/q", patterned_tensor(fc::DType::f16, {2}, 1)); }) ==
        path + ": /inputs/q: already exists");
  CHECK(error_of([&] { writer.write_tensor("/inputs/q/deeper", patterned_tensor(fc::DType::f16, {2}, 1)); }) ==
        path + ": /inputs/q: exists and is not a group");
  CHECK(error_of([&] { writer.write_tensor("/inputs", patterned_tensor(fc::DType::f16, {2}, 1)); }) ==
        path + ": /inputs: already exists");
  CHECK(error_of([&] { writer.write_tensor("/", patterned_tensor(fc::DType::f16, {2}, 1)); }) ==
        path + ": /: the root group cannot be a dataset");
  CHECK(error_of([&] { writer.write_tensor("relative", patterned_tensor(fc::DType::f16, {2}, 1)); }) ==
        path + ": relative: invalid object path (must be absolute, like /inputs/q)");
  CHECK(error_of([&] { writer.write_tensor("/unset", fc::HostTensor()); }) ==
        path + ": /unset: cannot write a tensor holding 0 bytes as fp64 []");
  CHECK(error_of([&] { writer.set_attribute("/inputs/k", "scale", 1.0); }) ==
        path + ": /inputs/k: no such group or dataset");
  CHECK(error_of([&] { writer.set_attribute("/inputs", "", 1.0); }) ==
        path + ": /inputs: attribute names cannot be empty");
  CHECK(error_of([&] { writer.set_attribute("/inputs", "bad", std::string("a\0b", 3)); }) ==
        path + ": /inputs: attribute 'bad': strings cannot contain NUL bytes");
}

TEST_CASE("Opening a missing, non-HDF5, empty or truncated file names the file and the problem", "[hdf5]") {
  TempDir dir;
  const std::string good = dir.file("good.h5");
  {
    fc::H5Writer writer(good);
    writer.write_tensor("/inputs/q", patterned_tensor(fc::DType::f32, {64, 64}, 1));
    writer.commit();
  }
  const std::string missing = dir.file("missing.h5");
  CHECK(error_of([&] { fc::H5Reader reader(missing); }) == missing + ": no such file");
  CHECK(error_of([&] { fc::H5Reader reader(dir.file("no/dir/x.h5")); }) == dir.file("no/dir/x.h5") + ": no such file");

  const std::string text = dir.file("notes.txt");
  write_bytes(text, "these are not the bytes you are looking for\n");
  CHECK(error_of([&] { fc::H5Reader reader(text); }) == text + ": not an HDF5 file");

  const std::string empty = dir.file("empty.h5");
  write_bytes(empty, "");
  CHECK(error_of([&] { fc::H5Reader reader(empty); }) == empty + ": not an HDF5 file");

  CHECK(error_of([&] { fc::H5Reader reader(dir.path()); }) == dir.path() + ": not an HDF5 file (a directory)");

  const std::string bytes = read_text(good);
  const std::string truncated = dir.file("truncated.h5");
  for (std::size_t keep : {std::size_t{8}, std::size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    INFO("keeping " << keep << " of " << bytes.size() << " bytes");
    write_bytes(truncated, bytes.substr(0, keep));
    const std::string message = error_of([&] { fc::H5Reader reader(truncated); });
    CHECK((message == truncated + ": cannot open (truncated or damaged)" ||
           message == truncated + ": not an HDF5 file"));
  }
}

TEST_CASE("Reading a missing dataset, a group or an unsupported datatype names the dataset", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("odd.h5");
  {
    fc::H5Handle file = raw_create(path);
    fc::H5Handle compound(FC_H5(H5Tcreate(H5T_COMPOUND, 8)), fc::H5Kind::datatype);
    FC_H5(H5Tinsert(compound.get(), "re", 0, H5T_NATIVE_FLOAT));
    FC_H5(H5Tinsert(compound.get(), "im", 4, H5T_NATIVE_FLOAT));
    raw_dataset(file.get(), "/stages/qk/data", compound.get(), {2});
    raw_dataset(file.get(), "/odd/int8", H5T_STD_I8LE, {2});
    raw_dataset(file.get(), "/odd/uint32", H5T_STD_U32LE, {2});
    raw_dataset(file.get(), "/odd/float128", H5T_NATIVE_LDOUBLE, {2});
    fc::H5Handle text(FC_H5(H5Tcopy(H5T_C_S1)), fc::H5Kind::datatype);
    FC_H5(H5Tset_size(text.get(), 8));
    raw_dataset(file.get(), "/odd/string", text.get(), {2});
    fc::H5Handle null_space(FC_H5(H5Screate(H5S_NULL)), fc::H5Kind::dataspace);
    raw_dataset(file.get(), "/odd/null", H5T_IEEE_F32LE, {}, H5I_INVALID_HID, nullptr, null_space.get());
    // 2^40 elements declared, nothing stored: chunks are allocated only when written.
    const std::vector<hsize_t> huge = {hsize_t{1} << 20, hsize_t{1} << 20};
    fc::H5Handle space(FC_H5(H5Screate_simple(2, huge.data(), nullptr)), fc::H5Kind::dataspace);
    fc::H5Handle dcpl(FC_H5(H5Pcreate(H5P_DATASET_CREATE)), fc::H5Kind::property_list);
    const hsize_t chunk[2] = {1, 1024};
    FC_H5(H5Pset_chunk(dcpl.get(), 2, chunk));
    FC_H5(H5Lcreate_soft("/odd/nothing_here", file.get(), "/odd/dangling", H5P_DEFAULT, H5P_DEFAULT));
    FC_H5(H5Lcreate_external("no_such_file.h5", "/x", file.get(), "/odd/elsewhere", H5P_DEFAULT, H5P_DEFAULT));
    fc::H5Handle dataset(FC_H5(H5Dcreate2(file.get(), "/odd/huge", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                          dcpl.get(), H5P_DEFAULT)),
                         fc::H5Kind::dataset);
  }
  fc::H5Reader reader(path);
  CHECK(error_of([&] { reader.read_tensor("/inputs/q"); }) == path + ": /inputs/q: missing dataset");
  CHECK(error_of([&] { reader.read_tensor("/stages/qk/other"); }) == path + ": /stages/qk/other: missing dataset");
  CHECK(error_of([&] { reader.read_tensor("/stages/qk"); }) == path + ": /stages/qk: not a dataset");
  CHECK_FALSE(reader.exists("/odd/dangling"));
  CHECK_FALSE(reader.exists("/odd/elsewhere"));
  CHECK(error_of([&] { reader.read_tensor("/odd/dangling"); }) == path + ": /odd/dangling: missing dataset");
  CHECK(error_of([&] { reader.read_tensor("/odd/elsewhere/x"); }) ==
        path + ": /odd/elsewhere/x: missing dataset");
  CHECK(error_of([&] { reader.read_tensor("/stages/qk/data"); }) ==
        path + ": /stages/qk/data: unsupported datatype (compound)");
  CHECK(error_of([&] { reader.read_tensor("/odd/int8"); }) == path + ": /odd/int8: unsupported datatype (int8)");
  CHECK(error_of([&] { reader.read_tensor("/odd/uint32"); }) ==
        path + ": /odd/uint32: unsupported datatype (uint32)");
  CHECK(starts_with(error_of([&] { reader.read_tensor("/odd/float128"); }),
                    path + ": /odd/float128: unsupported datatype (float"));
  CHECK(error_of([&] { reader.read_tensor("/odd/string"); }) ==
        path + ": /odd/string: unsupported datatype (string)");
  CHECK(error_of([&] { reader.read_tensor("/odd/null"); }) ==
        path + ": /odd/null: unsupported dataspace (null: no shape, no data)");
  CHECK(error_of([&] { reader.read_tensor("/odd/huge"); }) ==
        path + ": /odd/huge: too large (more than 2^36 elements)");
}

TEST_CASE("Datasets written by other tools map to dtypes by type class, size and dtype attribute", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("foreign.h5");
  const std::vector<std::uint16_t> bf16_bits = {0x3F80, 0xFF80, 0x7FC1};
  const std::vector<float> f32_values = {1.5f, -2.25f, 1e-30f};
  const std::vector<std::int8_t> enum_bools = {1, 0, 1, 1};
  const std::vector<std::uint8_t> raw_bools = {0, 2, 255, 1};
  {
    fc::H5Handle file = raw_create(path);
    raw_dataset(file.get(), "/big_endian_f32", H5T_IEEE_F32BE, {3}, H5T_NATIVE_FLOAT, f32_values.data());
    raw_dataset(file.get(), "/untagged_u16", H5T_STD_U16LE, {3}, H5T_NATIVE_UINT16, bf16_bits.data());
    // bfloat16 declared as a float type with an 8-bit exponent, as HDF5 2.0 does.
    fc::H5Handle bfloat(FC_H5(H5Tcopy(H5T_IEEE_F32LE)), fc::H5Kind::datatype);
    FC_H5(H5Tset_fields(bfloat.get(), 15, 7, 8, 0, 7));
    FC_H5(H5Tset_size(bfloat.get(), 2));
    FC_H5(H5Tset_ebias(bfloat.get(), 127));
    raw_dataset(file.get(), "/bf16_float_type", bfloat.get(), {3}, bfloat.get(), bf16_bits.data());
    // numpy bool as h5py stores it.
    fc::H5Handle bool_enum(FC_H5(H5Tenum_create(H5T_NATIVE_INT8)), fc::H5Kind::datatype);
    const std::int8_t false_value = 0, true_value = 1;
    FC_H5(H5Tenum_insert(bool_enum.get(), "FALSE", &false_value));
    FC_H5(H5Tenum_insert(bool_enum.get(), "TRUE", &true_value));
    raw_dataset(file.get(), "/h5py_bool", bool_enum.get(), {2, 2}, bool_enum.get(), enum_bools.data());
    raw_dataset(file.get(), "/bool_bytes", H5T_STD_U8LE, {4}, H5T_NATIVE_UINT8, raw_bools.data());
    raw_fixed_string_attribute(file.get(), "/bool_bytes", "dtype", "bool", H5T_STR_NULLTERM);
  }
  fc::H5Reader reader(path);
  const fc::HostTensor f32 = reader.read_tensor("/big_endian_f32");
  CHECK(f32.dtype() == fc::DType::f32);
  CHECK(std::vector<float>(f32.data_as<float>(), f32.data_as<float>() + 3) == f32_values);
  CHECK(same_bits(reader.read_tensor("/untagged_u16"), tensor_from_bits(fc::DType::u16, {3}, bf16_bits)));
  CHECK(same_bits(reader.read_tensor("/bf16_float_type"), tensor_from_bits(fc::DType::bf16, {3}, bf16_bits)));
  CHECK(same_bits(reader.read_tensor("/h5py_bool"), bool_tensor({2, 2}, {1, 0, 1, 1})));
  CHECK(same_bits(reader.read_tensor("/bool_bytes"), bool_tensor({4}, {0, 1, 1, 1})));  // nonzero is true
}

TEST_CASE("Corrupted files raise fc::Error, never crash, and leave no HDF5 identifier open", "[hdf5]") {
  TempDir dir;
  const std::string original = dir.file("original.h5");
  const std::vector<std::string> datasets = {"/inputs/q", "/inputs/k", "/inputs/mask", "/inputs/scale",
                                             "/stages/qk/data", "/stages/qk/bias", "/outputs/o"};
  const std::vector<std::string> groups = {"/", "/inputs", "/stages", "/stages/qk", "/outputs", "/many"};
  {
    fc::H5Writer writer(original);
    writer.write_tensor("/inputs/q", patterned_tensor(fc::DType::f16, {1, 2, 16, 8}, 1));
    writer.write_tensor("/inputs/k", patterned_tensor(fc::DType::bf16, {1, 2, 16, 8}, 2));
    writer.write_tensor("/inputs/mask", patterned_tensor(fc::DType::boolean, {16, 16}, 3));
    writer.write_tensor("/inputs/scale", patterned_tensor(fc::DType::f64, {}, 4));
    writer.write_tensor("/stages/qk/data", patterned_tensor(fc::DType::f32, {2, 16, 16}, 5));
    writer.write_tensor("/stages/qk/bias", patterned_tensor(fc::DType::i32, {0, 16}, 6));
    writer.write_tensor("/outputs/o", patterned_tensor(fc::DType::f32, {1, 2, 16, 8}, 7));
    writer.set_attribute("/", "revision", std::string("abc123"));
    writer.set_attribute("/inputs", "shape", std::vector<std::int64_t>{1, 2, 16, 16, 8});
    writer.set_attribute("/stages/qk", "tolerances", std::vector<double>{1e-3, 1e-2});
    writer.set_attribute("/stages/qk/data", "seed", std::int64_t{42});
    writer.set_attribute("/stages/qk/data", "scale", 0.25);
    // More than 8 links and 8 attributes: HDF5 moves them to "dense" storage (a fractal
    // heap indexed by a B-tree), which has its own failure paths.
    for (int i = 0; i < 12; ++i) {
      writer.ensure_group("/many/g" + std::to_string(i));
      writer.set_attribute("/many", "a" + std::to_string(i), "value " + std::to_string(i));
    }
    writer.commit();
  }
  // Reads everything the file should hold; returns how many reads failed with fc::Error.
  auto read_everything = [&](const std::string& path) {
    int errors = 0;
    auto attempt = [&errors](const std::function<void()>& read) {
      try {
        read();
      } catch (const fc::Error&) {
        ++errors;
      }
    };
    std::optional<fc::H5Reader> reader;
    attempt([&] { reader.emplace(path); });
    if (!reader) return errors;
    for (const std::string& group : groups) attempt([&] { reader->children(group); });
    for (const std::string& dataset : datasets) {
      attempt([&] { reader->exists(dataset); });
      attempt([&] { reader->read_tensor(dataset); });
    }
    attempt([&] { reader->string_attribute("/", "revision"); });
    attempt([&] { reader->int_list_attribute("/inputs", "shape"); });
    attempt([&] { reader->double_list_attribute("/stages/qk", "tolerances"); });
    attempt([&] { reader->int_attribute("/stages/qk/data", "seed"); });
    attempt([&] { reader->double_attribute("/stages/qk/data", "scale"); });
    attempt([&] { reader->string_attribute("/many", "a0"); });
    attempt([&] { reader->string_attribute("/many", "a11"); });
    attempt([&] { reader->exists("/many/g5"); });
    return errors;
  };

  REQUIRE(read_everything(original) == 0);
  const ssize_t objects_before = open_object_count();
  const std::string bytes = read_text(original);
  const std::string damaged = dir.file("damaged.h5");
  int failed_reads = 0;
  auto read_modified = [&](const std::string& modified) {
    write_bytes(damaged, modified);
    failed_reads += read_everything(damaged);
  };
  for (std::size_t keep = 0; keep < bytes.size(); keep += 97) read_modified(bytes.substr(0, keep));
  fc::Rng rng(2024);
  for (std::size_t offset = 0; offset < bytes.size(); offset += 17) {
    std::string flipped = bytes;
    flipped[offset] = static_cast<char>(flipped[offset] ^ (1u << rng.below(8)));
    read_modified(flipped);
  }
  // Every bit of the global heap's header and first objects (no checksum guards them).
  const std::size_t heap = bytes.find("GCOL");
  REQUIRE(heap != std::string::npos);
  for (std::size_t offset = heap; offset < std::min(heap + 88, bytes.size()); ++offset) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[offset] = static_cast<char>(flipped[offset] ^ (1 << bit));
      read_modified(flipped);
    }
  }
  // Every byte of the first fractal heap header and B-tree leaf of dense storage.
  for (const char* signature : {"FRHP", "BTLF"}) {
    const std::size_t start = bytes.find(signature);
    REQUIRE(start != std::string::npos);
    for (std::size_t offset = start; offset < std::min(start + 144, bytes.size()); ++offset) {
      std::string flipped = bytes;
      flipped[offset] = static_cast<char>(flipped[offset] ^ (1u << rng.below(8)));
      read_modified(flipped);
    }
  }
  for (int round = 0; round < 100; ++round) {  // a few bytes overwritten at once
    std::string scrambled = bytes;
    for (int k = 0; k < 4; ++k) {
      scrambled[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(bytes.size())))] =
          static_cast<char>(rng.next() & 0xFF);
    }
    read_modified(scrambled);
  }
  SUCCEED("bytes: " << bytes.size() << ", failed reads: " << failed_reads);
  CHECK(failed_reads > 0);
  CHECK(open_object_count() == objects_before);

  SECTION("a deleted dataset reads as missing") {
    const std::string edited = dir.file("edited.h5");
    write_bytes(edited, bytes);
    {
      fc::H5Handle file(FC_H5(H5Fopen(edited.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), fc::H5Kind::file);
      FC_H5(H5Ldelete(file.get(), "/stages/qk/data", H5P_DEFAULT));
      FC_H5(H5Ldelete(file.get(), "/inputs", H5P_DEFAULT));
    }
    fc::H5Reader reader(edited);
    CHECK(error_of([&] { reader.read_tensor("/stages/qk/data"); }) == edited + ": /stages/qk/data: missing dataset");
    CHECK(error_of([&] { reader.read_tensor("/inputs/q"); }) == edited + ": /inputs/q: missing dataset");
    CHECK_FALSE(reader.exists("/inputs"));
    CHECK(reader.children("/stages/qk") == std::vector<std::string>{"bias"});
  }
}

TEST_CASE("A damaged global heap makes a string attribute an error instead of a crash or a hang", "[hdf5]") {
  TempDir dir;
  const std::string good = dir.file("good.h5");
  {
    fc::H5Writer writer(good);
    writer.set_attribute("/", "note", std::string("hello"));
    writer.commit();
  }
  const std::string bytes = read_text(good);
  const std::size_t heap = bytes.find("GCOL");
  REQUIRE(heap != std::string::npos);
  // Collection: "GCOL", version, 3 reserved, size (8); then object 1: index (2),
  // reference count (2), reserved (4), size (8), the 5 characters padded to 8.
  const std::size_t collection_size = heap + 8, object_index = heap + 16, object_size = heap + 24;
  auto with_bytes = [&](std::size_t offset, const std::string& replacement) {
    std::string modified = bytes;
    modified.replace(offset, replacement.size(), replacement);
    return modified;
  };
  auto le64 = [](std::uint64_t v) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
    return out;
  };
  REQUIRE(bytes.substr(object_size, 8) == le64(5));
  REQUIRE(bytes.substr(object_size + 8, 5) == "hello");

  const std::vector<std::pair<std::string, std::string>> damages = {
      {"object size beyond the collection", with_bytes(object_size, le64(std::uint64_t{1} << 40))},
      {"object size running into free space", with_bytes(object_size, le64(300))},
      {"object size shorter than the string", with_bytes(object_size, le64(4))},
      {"object size longer than the string", with_bytes(object_size, le64(6))},
      {"object index changed", with_bytes(object_index, std::string("\x02\x00", 2))},
      {"collection size below the minimum", with_bytes(collection_size, le64(64))},
      {"collection size beyond the file", with_bytes(collection_size, le64(std::uint64_t{1} << 32))},
      {"signature", with_bytes(heap, "GCOX")},
  };
  const std::string damaged = dir.file("damaged.h5");
  for (const auto& [what, modified] : damages) {
    INFO(what);
    write_bytes(damaged, modified);
    fc::H5Reader reader(damaged);
    CHECK(error_of([&] { reader.string_attribute("/", "note"); }) ==
          damaged + ": /: attribute 'note': cannot read (damaged file?)");
  }
  write_bytes(damaged, with_bytes(object_size + 8, "HELLO"));  // text damage is undetectable, but harmless
  CHECK(fc::H5Reader(damaged).string_attribute("/", "note") == "HELLO");
}

TEST_CASE("h5dump and h5py read our files as the schema says", "[hdf5][interop]") {
  TempDir dir;
  const std::string path = dir.file("interop.h5");
  {
    fc::H5Writer writer(path);
    writer.write_tensor("/interop/half", tensor_from_bits(fc::DType::f16, {2, 3}, kInteropHalfBits));
    writer.write_tensor("/interop/bf16", tensor_from_bits(fc::DType::bf16, {4}, kInteropBf16Bits));
    writer.write_tensor("/interop/mask", bool_tensor({2, 2}, {1, 0, 0, 1}));
    fc::HostTensor scalar(fc::DType::f64, {});
    scalar.set(0, 0.375);
    writer.write_tensor("/interop/scalar", scalar);
    writer.set_attribute("/interop", "note", std::string("flash attention ✓"));
    writer.set_attribute("/interop", "seed", std::int64_t{42});
    writer.set_attribute("/interop", "scale", 0.125);
    writer.set_attribute("/interop", "shape", std::vector<std::int64_t>{2, 4, 128, 64});
    writer.set_attribute("/interop", "tolerances", std::vector<double>{1e-3, 2.5e-2});
    writer.commit();
  }

  SECTION("h5dump lists the datasets and prints the fp16 values") {
    const CommandResult which = run_command("command -v h5dump", dir.file("which.txt"));
    INFO(which.output);
    if (which.exit_code != 0) FAIL("h5dump is not installed (apt-get install hdf5-tools)");
    const CommandResult header = run_command("h5dump -H " + shell_quote(path), dir.file("header.txt"));
    INFO(header.output);
    CHECK(header.exit_code == 0);
    for (const char* name : {"DATASET \"half\"", "DATASET \"bf16\"", "DATASET \"mask\"", "DATASET \"scalar\""}) {
      CHECK(contains(header.output, name));
    }
    const CommandResult values = run_command("h5dump -d /interop/half " + shell_quote(path), dir.file("values.txt"));
    INFO(values.output);
    CHECK(values.exit_code == 0);
    CHECK(contains(values.output, "0.5, -1.5, 2"));
    CHECK(contains(values.output, "65504"));
  }

  SECTION("h5py sees float16, tagged uint16 and uint8, and str attributes") {
    const std::string python = python_with_h5py();
    if (python.empty()) FAIL(kNoPython);
    const CommandResult check =
        run_command(python + " " + shell_quote(kInteropScript) + " " + shell_quote(path), dir.file("check.txt"));
    INFO(python << " " << kInteropScript << " exited " << check.exit_code << ":\n" << check.output);
    CHECK(check.exit_code == 0);
    CHECK(contains(check.output, "check_h5_module: ok"));
  }
}

TEST_CASE("Files written by h5py read back through the reader", "[hdf5][interop]") {
  const std::string python = python_with_h5py();
  if (python.empty()) FAIL(kNoPython);
  TempDir dir;
  const std::string path = dir.file("from_h5py.h5");
  const CommandResult write = run_command(
      python + " " + shell_quote(kInteropScript) + " --write " + shell_quote(path), dir.file("write.txt"));
  INFO(write.output);
  REQUIRE(write.exit_code == 0);

  fc::H5Reader reader(path);
  CHECK(reader.children("/") == std::vector<std::string>{"h5py"});
  CHECK(reader.children("/h5py") == std::vector<std::string>{"bf16", "half", "ints", "lzf", "mask"});
  CHECK(error_of([&] { reader.read_tensor("/h5py/lzf"); }) ==
        path + ": /h5py/lzf: cannot read (needs HDF5 filter 32000 (lzf), which this HDF5 library lacks)");
  CHECK(same_bits(reader.read_tensor("/h5py/half"), tensor_from_bits(fc::DType::f16, {2, 3}, kInteropHalfBits)));
  CHECK(same_bits(reader.read_tensor("/h5py/bf16"), tensor_from_bits(fc::DType::bf16, {4}, kInteropBf16Bits)));
  CHECK(same_bits(reader.read_tensor("/h5py/mask"), bool_tensor({2, 2}, {1, 0, 0, 1})));
  const fc::HostTensor ints = reader.read_tensor("/h5py/ints");
  CHECK(ints.dtype() == fc::DType::i64);
  CHECK(ints.dims() == fc::Dims{2, 3});
  CHECK(ints.get(5) == 5.0);
  CHECK(reader.string_attribute("/h5py", "note") == "written by h5py ✓");
  CHECK(reader.string_attribute("/h5py", "fixed") == "fixed bytes");
  CHECK(reader.int_attribute("/h5py", "count") == 7);
  CHECK(reader.double_attribute("/h5py", "ratio") == 0.5);
  CHECK(reader.int_list_attribute("/h5py", "dims") == std::vector<std::int64_t>{1, 2, 3});
  CHECK(reader.double_list_attribute("/h5py", "list") == std::vector<double>{0.25, 0.5});
}

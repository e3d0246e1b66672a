// .npy/.npz reading and writing: round trips, files written by real NumPy
// (tests/data/make_npz_fixtures.py), and damaged input that must fail as one-line fc::Errors.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "harness/io/npz.h"

namespace {

using Bytes = std::vector<std::uint8_t>;

std::string fixture(const std::string& name) { return std::string(FC_TEST_DATA_DIR) + "/" + name; }

// A fresh directory under the system temp directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("fc_test_npz_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

// The fc::Error message of f(), failing the test if f does not throw one.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fc::Error& e) {
    return e.what();
  }
  FAIL("expected an fc::Error");
  return {};
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Every message about a file: "PATH: what", on one line.
void check_file_message(const std::string& message, const std::string& path) {
  INFO(message);
  CHECK(starts_with(message, path + ": "));
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find('\r') == std::string::npos);
}

std::string read_error(const std::string& path) {
  const std::string message = error_of([&] { fc::read_npz(path); });
  check_file_message(message, path);
  return message;
}

std::uint32_t load32(const Bytes& b, std::size_t at) {
  return static_cast<std::uint32_t>(b.at(at) | b.at(at + 1) << 8 | b.at(at + 2) << 16) |
         static_cast<std::uint32_t>(b.at(at + 3)) << 24;
}
void store16(Bytes& b, std::size_t at, std::uint16_t v) {
  b.at(at) = static_cast<std::uint8_t>(v);
  b.at(at + 1) = static_cast<std::uint8_t>(v >> 8);
}
void store32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
void store64(Bytes& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}

// Offsets of every occurrence of a 4-byte ZIP signature.
std::vector<std::size_t> find_signature(const Bytes& b, std::uint32_t signature) {
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i + 4 <= b.size(); ++i) {
    if (load32(b, i) == signature) at.push_back(i);
  }
  return at;
}
constexpr std::uint32_t kLocal = 0x04034b50, kCentral = 0x02014b50;

// Offsets inside ZIP records (APPNOTE 4.3.7 and 4.3.12).
constexpr std::size_t kCentralFlags = 8, kCentralMethod = 10, kCentralCrc = 16, kCentralSize = 24,
                      kCentralNameLength = 28, kCentralLocalOffset = 42, kCentralName = 46;
constexpr std::size_t kLocalMethod = 8, kLocalSize = 22, kLocalName = 30;

// A .npy image with the given header dict (newline added) and raw data bytes.
Bytes npy_image(const std::string& dict, const Bytes& data, int major = 1) {
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  const std::string header = dict + "\n";
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i)
    out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <class T>
Bytes raw(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

fc::NpyArray parse(const Bytes& image) {
  return fc::parse_npy("mem.npz: q.npy", image.data(), image.size());
}

std::string parse_error(const Bytes& image) {
  const std::string message = error_of([&] { parse(image); });
  check_file_message(message, "mem.npz: q.npy");
  return message;
}

constexpr fc::DType kAllDTypes[] = {fc::DType::f16, fc::DType::bf16,    fc::DType::f32,
                                    fc::DType::f64, fc::DType::boolean, fc::DType::i32,
                                    fc::DType::i64, fc::DType::u8,      fc::DType::u16};

// A tensor whose values differ element by element and use the sign where the type has one.
fc::HostTensor sample_tensor(fc::DType dtype, const fc::Dims& dims) {
  fc::HostTensor t(dtype, dims);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype) {
      case fc::DType::boolean:
        t.set(i, i % 2);
        break;
      case fc::DType::u8:
      case fc::DType::u16:
        t.set(i, static_cast<double>(i * 7 + 1));
        break;
      case fc::DType::i64:
        t.data_as<std::int64_t>()[i] = (i - 3) * (std::int64_t{1} << 40) + 5;
        break;
      default:
        t.set(i, (static_cast<double>(i) - 3.0) * 0.375);
        break;
    }
  }
  return t;
}

Bytes tensor_bytes(const fc::HostTensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.data());
  return Bytes(p, p + t.nbytes());
}

// A small valid archive written by write_npz, used as the base of damage tests.
Bytes small_archive(const TempDir& dir) {
  const std::string path = dir.file("small.npz");
  fc::write_npz(path, {{"a", sample_tensor(fc::DType::f32, {2, 3})},
                       {"b", sample_tensor(fc::DType::boolean, {3})}});
  return read_bytes(path);
}

// --- the fixtures: every value is the formula make_npz_fixtures.py uses, over C-order index i

void check_fixture_arrays(const std::map<std::string, fc::NpyArray>& arrays) {
  REQUIRE(arrays.size() == 15);
  auto tensor = [&](const std::string& name, fc::DType dtype,
                    const fc::Dims& dims) -> const fc::HostTensor& {
    INFO(name);
    const fc::NpyArray& a = arrays.at(name);
    REQUIRE_FALSE(a.is_text);
    REQUIRE(a.tensor.dtype() == dtype);
    REQUIRE(a.tensor.dims() == dims);
    return a.tensor;
  };
  const auto& f16 = tensor("f16", fc::DType::f16, {3, 4});
  for (int i = 0; i < 12; ++i) CHECK(f16.get(i) == i * 0.25 - 1);
  const auto& f32 = tensor("f32", fc::DType::f32, {2, 3, 4});
  for (int i = 0; i < 24; ++i) CHECK(f32.get(i) == (i - 7) / 8.0);
  const auto& mask = tensor("mask", fc::DType::boolean, {10});
  for (int i = 0; i < 10; ++i) CHECK(mask.data_as<std::uint8_t>()[i] == (i % 3 == 0 ? 1 : 0));
  const auto& u16 = tensor("u16", fc::DType::u16, {2, 3});
  for (int i = 0; i < 6; ++i) CHECK(u16.data_as<std::uint16_t>()[i] == i * 10007);
  const auto& i64 = tensor("i64", fc::DType::i64, {4});
  for (int i = 0; i < 4; ++i) CHECK(i64.data_as<std::int64_t>()[i] == i - (std::int64_t{1} << 40));
  const auto& fortran = tensor("fortran", fc::DType::f32, {2, 3, 4});
  for (int i = 0; i < 24; ++i) CHECK(fortran.get(i) == i);
  const auto& big_f64 = tensor("big_f64", fc::DType::f64, {5});
  for (int i = 0; i < 5; ++i) CHECK(big_f64.get(i) == i * 1.5 - 2);
  const auto& big_i32 = tensor("big_i32", fc::DType::i32, {4});
  for (int i = 0; i < 4; ++i) CHECK(big_i32.data_as<std::int32_t>()[i] == i * -70000 + 3);
  const auto& big_fortran = tensor("big_fortran", fc::DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) CHECK(big_fortran.get(i) == i - 2.5);
  const auto& scalar = tensor("scalar", fc::DType::f64, {});
  CHECK(scalar.numel() == 1);
  CHECK(scalar.get(0) == 3.25);
  const auto& flag = tensor("flag", fc::DType::boolean, {});
  CHECK(flag.data_as<std::uint8_t>()[0] == 1);
  const auto& empty = tensor("empty", fc::DType::f32, {0, 3});
  CHECK(empty.numel() == 0);

  CHECK(arrays.at("label").is_text);
  CHECK(arrays.at("label").text == "\xce\xbc-attn");  // "μ-attn", UTF-8
  CHECK(arrays.at("label1").is_text);
  CHECK(arrays.at("label1").text == "v2");
  CHECK(arrays.at("tag").is_text);
  CHECK(arrays.at("tag").text == "qk");
}

// What reading a possibly damaged archive did: anything but an fc::Error escapes and fails.
enum class Outcome { parsed, rejected };
Outcome read_outcome(const std::string& path) {
  try {
    fc::read_npz(path);
    return Outcome::parsed;
  } catch (const fc::Error& e) {
    check_file_message(e.what(), path);
    return Outcome::rejected;
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Round trips

TEST_CASE("Every dtype at ranks 0 to 4 survives a write and a read unchanged", "[npz]") {
  TempDir dir;
  const std::vector<fc::Dims> shapes = {{}, {5}, {2, 3}, {2, 3, 4}, {2, 1, 3, 2}, {0, 3}};
  std::map<std::string, fc::HostTensor> arrays;
  for (fc::DType dtype : kAllDTypes) {
    for (const fc::Dims& dims : shapes) {
      arrays[std::string(fc::dtype_name(dtype)) + "_" + std::to_string(dims.size()) + "d" +
             (fc::numel_of(dims) == 0 ? "_empty" : "")] = sample_tensor(dtype, dims);
    }
  }
  const std::string path = dir.file("all.npz");
  fc::write_npz(path, arrays);
  const auto back = fc::read_npz(path);
  REQUIRE(back.size() == arrays.size());
  for (const auto& [name, written] : arrays) {
    INFO(name);
    const fc::NpyArray& read = back.at(name);
    REQUIRE_FALSE(read.is_text);
    // NumPy has no bfloat16: bf16 goes out as '<u2' and comes back as its bits.
    CHECK(read.tensor.dtype() ==
          (written.dtype() == fc::DType::bf16 ? fc::DType::u16 : written.dtype()));
    CHECK(read.tensor.dims() == written.dims());
    CHECK(tensor_bytes(read.tensor) == tensor_bytes(written));
  }
}

TEST_CASE("Written .npy headers are padded so that the data starts on a 64-byte boundary",
          "[npz]") {
  TempDir dir;
  const std::string path = dir.file("aligned.npz");
  fc::write_npz(path, {{"x", sample_tensor(fc::DType::f32, {3})}});
  const Bytes bytes = read_bytes(path);
  const std::size_t npy = kLocalName + std::strlen("x.npy");  // the only entry has no extra field
  REQUIRE(bytes.size() > npy + 10);
  const std::size_t header_length = bytes[npy + 8] | bytes[npy + 9] << 8;
  CHECK((10 + header_length) % 64 == 0);
  CHECK(bytes[npy + 10 + header_length - 1] == '\n');
  const std::string header(bytes.begin() + static_cast<std::ptrdiff_t>(npy + 10),
                           bytes.begin() + static_cast<std::ptrdiff_t>(npy + 10 + header_length));
  CHECK(starts_with(header, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"));
}

TEST_CASE("An archive without arrays reads as an empty map", "[npz]") {
  TempDir dir;
  fc::write_npz(dir.file("none.npz"), {});
  CHECK(fc::read_npz(dir.file("none.npz")).empty());
}

TEST_CASE("Writing replaces the file only when complete and leaves no temporary behind", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("out.npz");
  fc::write_npz(path, {{"x", sample_tensor(fc::DType::f64, {2})}});
  fc::write_npz(path, {{"y", sample_tensor(fc::DType::i32, {3})}});
  const auto back = fc::read_npz(path);
  CHECK(back.size() == 1);
  CHECK(back.count("y") == 1);
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    CHECK(entry.path().filename() == "out.npz");
  }
}

TEST_CASE("Writing to a directory that does not exist fails with the path", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("missing/out.npz");
  const std::string message = error_of([&] {
    fc::write_npz(path, {{"x", sample_tensor(fc::DType::f32, {1})}});
  });
  check_file_message(message, path);
}

TEST_CASE("Writing refuses an empty array name", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("out.npz");
  check_file_message(error_of([&] {
                       fc::write_npz(path, {{"", sample_tensor(fc::DType::f32, {1})}});
                     }),
                     path);
  CHECK_FALSE(std::filesystem::exists(path));
}

// ------------------------------------------------------------------------------------------
// Files written by NumPy

TEST_CASE("Arrays saved by np.savez (stored entries) read back with their exact values", "[npz]") {
  check_fixture_arrays(fc::read_npz(fixture("stored.npz")));
}

TEST_CASE("Arrays saved by np.savez_compressed (deflate entries) read back with their exact values",
          "[npz]") {
  check_fixture_arrays(fc::read_npz(fixture("compressed.npz")));
}

TEST_CASE("A ZIP64 archive with a comment reads back", "[npz]") {
  const auto arrays = fc::read_npz(fixture("zip64.npz"));
  REQUIRE(arrays.size() == 2);
  const fc::HostTensor& z = arrays.at("z").tensor;
  REQUIRE(z.dtype() == fc::DType::i64);
  REQUIRE(z.dims() == fc::Dims{5});
  for (int i = 0; i < 5; ++i) CHECK(z.data_as<std::int64_t>()[i] == 3 * i);
  const fc::HostTensor& flag = arrays.at("flag").tensor;
  REQUIRE(flag.dtype() == fc::DType::boolean);
  REQUIRE(flag.dims().empty());
  CHECK(flag.data_as<std::uint8_t>()[0] == 0);
}

TEST_CASE("An unsupported dtype is named in the error", "[npz]") {
  const std::string path = fixture("bad_dtype.npz");
  CHECK(read_error(path) == path + ": q.npy: unsupported dtype '<c8'");
}

TEST_CASE("A .npy whose data is shorter than its shape is rejected", "[npz]") {
  const std::string path = fixture("bad_length.npz");
  CHECK(starts_with(read_error(path),
                    path + ": q.npy: data is 20 bytes, but shape [2,3] of '<f4' needs 24"));
}

TEST_CASE("A .npy with a broken header dictionary is rejected", "[npz]") {
  const std::string path = fixture("bad_header.npz");
  CHECK(starts_with(read_error(path), path + ": q.npy: bad .npy header"));
}

// ------------------------------------------------------------------------------------------
// Files that are not archives

TEST_CASE("A missing file is reported with its path", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("absent.npz");
  CHECK(starts_with(read_error(path), path + ": cannot open"));
}

TEST_CASE("A directory is not read as an archive", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("");
  check_file_message(error_of([&] { fc::read_npz(path); }), path);
}

TEST_CASE("An empty file is not an archive", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("empty.npz");
  write_bytes(path, {});
  CHECK(read_error(path) == path + ": empty file, not a .npz archive");
}

TEST_CASE("Random bytes and a text file are not archives", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("junk.npz");
  Bytes junk(1000);
  std::uint32_t state = 12345;
  for (auto& b : junk) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(state >> 24);
  }
  write_bytes(path, junk);
  CHECK(read_error(path).find("not a .npz archive") != std::string::npos);

  const std::string text = "q = [1, 2, 3]\nthis is not a zip file\n";
  write_bytes(path, Bytes(text.begin(), text.end()));
  CHECK(read_error(path).find("not a .npz archive") != std::string::npos);
}

// ------------------------------------------------------------------------------------------
// Damaged archives

TEST_CASE("An archive truncated at any of several lengths is rejected", "[npz]") {
  TempDir dir;
  const Bytes good = read_bytes(fixture("stored.npz"));
  const std::string path = dir.file("cut.npz");
  for (std::size_t length :
       {std::size_t{1}, std::size_t{21}, std::size_t{22}, std::size_t{100}, good.size() / 2,
        good.size() - 23, good.size() - 22, good.size() - 1}) {
    INFO("length " << length);
    write_bytes(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)));
    read_error(path);
  }
}

TEST_CASE("A damaged central directory is rejected", "[npz]") {
  TempDir dir;
  const Bytes good = small_archive(dir);
  const std::size_t central = find_signature(good, kCentral).at(0);
  const std::string path = dir.file("bad.npz");

  Bytes bad = good;
  bad[central] ^= 0x01;
  write_bytes(path, bad);
  CHECK(starts_with(read_error(path), path + ": not a .npz archive (libzip: "));

  // libzip checks every local header against the central directory (ZIP_CHECKCONS).
  bad = good;
  bad[central + kCentralName] ^= 0x20;  // "a.npy" -> "A.npy"
  write_bytes(path, bad);
  CHECK(starts_with(read_error(path), path + ": damaged .npz archive (libzip: "));

  bad = good;
  bad[central + kCentralCrc] ^= 0x01;
  write_bytes(path, bad);
  CHECK(starts_with(read_error(path), path + ": damaged .npz archive (libzip: "));

  bad = good;
  bad[central + kCentralLocalOffset] ^= 0x04;
  write_bytes(path, bad);
  read_error(path);
}

TEST_CASE("A damaged local header is rejected", "[npz]") {
  TempDir dir;
  const Bytes good = small_archive(dir);
  const std::size_t local = find_signature(good, kLocal).at(0);
  const std::string path = dir.file("bad.npz");

  Bytes bad = good;
  bad[local + 1] ^= 0xff;
  write_bytes(path, bad);
  CHECK(starts_with(read_error(path), path + ": not a .npz archive (libzip: "));

  bad = good;
  bad[local + kLocalName] = 'z';
  write_bytes(path, bad);
  CHECK(starts_with(read_error(path), path + ": damaged .npz archive (libzip: "));
}

TEST_CASE("Damaged array data fails the CRC check", "[npz]") {
  TempDir dir;
  const Bytes good = small_archive(dir);
  const std::size_t second_local = find_signature(good, kLocal).at(1);
  const std::string path = dir.file("bad.npz");
  Bytes bad = good;
  bad[second_local - 1] ^= 0x40;  // last data byte of the first entry
  write_bytes(path, bad);
  CHECK(read_error(path) == path + ": a.npy: CRC-32 mismatch, data is damaged");
}

TEST_CASE("Damaged deflate data is rejected", "[npz]") {
  TempDir dir;
  const Bytes good = read_bytes(fixture("compressed.npz"));
  const std::size_t local = find_signature(good, kLocal).at(0);
  const std::string path = dir.file("bad.npz");
  const std::size_t data =
      local + kLocalName + std::strlen("f16.npy") + 20;  // zip64 extra of np.savez
  for (std::size_t at : {data, data + 1, data + 5, data + 20}) {
    Bytes bad = good;
    bad[at] ^= 0x55;
    write_bytes(path, bad);
    INFO("flipped byte " << at);
    CHECK(starts_with(read_error(path), path + ": f16.npy: "));
  }
}

TEST_CASE("A recorded size that disagrees with the .npy header is rejected before decompressing",
          "[npz]") {
  TempDir dir;
  Bytes bad = read_bytes(fixture("compressed.npz"));
  const std::size_t central = find_signature(bad, kCentral).at(0);
  const std::size_t local = find_signature(bad, kLocal).at(0);
  // The same size in the central directory and the local header's ZIP64 field, so that
  // the archive is consistent and only the .npy header can tell.
  store32(bad, central + kCentralSize, 0xfffffff0u);
  store32(bad, local + kLocalSize, 0xfffffff0u);
  store64(bad, local + kLocalName + std::strlen("f16.npy") + 4, 0xfffffff0u);
  const std::string path = dir.file("bad.npz");
  write_bytes(path, bad);
  CHECK(read_error(path).find("does not match") != std::string::npos);
}

TEST_CASE("Sizes over 64 GiB are refused", "[npz]") {
  TempDir dir;
  Bytes bad = read_bytes(fixture("zip64.npz"));
  const std::size_t central = find_signature(bad, kCentral).at(0);
  const std::size_t local = find_signature(bad, kLocal).at(0);
  // "z.npy" made a deflated entry of 1 TiB in both headers: consistent, so only the limit refuses it.
  store16(bad, central + kCentralMethod, 8);
  store16(bad, local + kLocalMethod, 8);
  store64(bad, central + kCentralName + std::strlen("z.npy") + 4, std::uint64_t{1} << 40);  // uncompressed size
  store64(bad, local + kLocalName + std::strlen("z.npy") + 4, std::uint64_t{1} << 40);
  const std::string path = dir.file("bad.npz");
  write_bytes(path, bad);
  CHECK(read_error(path).find("over the 64 GiB limit") != std::string::npos);
}

TEST_CASE("Encrypted entries and unknown compression methods are refused", "[npz]") {
  TempDir dir;
  const Bytes good = small_archive(dir);
  const std::size_t central = find_signature(good, kCentral).at(0);
  const std::size_t local = find_signature(good, kLocal).at(0);
  const std::string path = dir.file("bad.npz");

  Bytes bad = good;
  bad[central + kCentralFlags] |= 0x01;
  write_bytes(path, bad);
  CHECK(read_error(path) == path + ": a.npy: encrypted ZIP entries are not supported");

  bad = good;
  store16(bad, central + kCentralMethod, 12);
  store16(bad, local + kLocalMethod, 12);
  write_bytes(path, bad);
  CHECK(starts_with(read_error(path), path + ": a.npy: unsupported ZIP compression method 12"));
}

TEST_CASE("Entries that share their bytes and their name are refused", "[npz]") {
  TempDir dir;
  Bytes bad = small_archive(dir);
  const std::vector<std::size_t> central = find_signature(bad, kCentral);
  REQUIRE(central.size() == 2);
  // Point "b.npy" at the entry of "a.npy", renamed so that the local header matches.
  bad[central[1] + kCentralName] = 'a';
  store32(bad, central[1] + kCentralLocalOffset, load32(bad, central[0] + kCentralLocalOffset));
  const std::string path = dir.file("bad.npz");
  write_bytes(path, bad);
  CHECK(starts_with(read_error(path), path + ": damaged .npz archive (libzip: "));
}

TEST_CASE("A ZIP comment that contains an end-record signature does not mislead the reader",
          "[npz]") {
  TempDir dir;
  Bytes archive = small_archive(dir);
  const std::string comment = std::string("PK\x05\x06", 4) + "0123456789abcdefghij trailing words";
  store16(archive, archive.size() - 2, static_cast<std::uint16_t>(comment.size()));
  archive.insert(archive.end(), comment.begin(), comment.end());
  const std::string path = dir.file("comment.npz");
  write_bytes(path, archive);
  CHECK(fc::read_npz(path).size() == 2);
}

TEST_CASE("Every truncation and many single-byte flips either parse or throw fc::Error", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("fuzz.npz");
  for (const std::string& source :
       {std::string("small"), fixture("compressed.npz"), fixture("zip64.npz")}) {
    const Bytes good = source == "small" ? small_archive(dir) : read_bytes(source);
    INFO(source);
    for (std::size_t length = 0; length < good.size(); ++length) {
      write_bytes(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)));
      INFO("truncated to " << length);
      CHECK(read_outcome(path) == Outcome::rejected);
    }
    int parsed = 0, rejected = 0;
    for (std::size_t at = 0; at < good.size(); ++at) {
      for (std::uint8_t mask : {0x01, 0x10, 0x80, 0xff}) {
        Bytes bad = good;
        bad[at] ^= mask;
        write_bytes(path, bad);
        INFO("byte " << at << " ^ " << int{mask});
        (read_outcome(path) == Outcome::parsed ? parsed : rejected)++;
      }
    }
    INFO(parsed << " flips parsed, " << rejected << " rejected");
    CHECK(rejected > parsed);
  }
}

// ------------------------------------------------------------------------------------------
// .npy images

TEST_CASE("Header dictionaries parse in any key order, spacing and quoting", "[npz]") {
  const Bytes data = raw<float>({1.5f, -2.0f, 3.25f});
  for (const std::string dict : {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                 "{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}",
                                 "{ \"fortran_order\" :False,\"shape\":( 3 , ),'descr':'=f4' ,}   ",
                                 "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,)}",
                                 "\t{'descr':'<f4','fortran_order':True,'shape':(3,)}"}) {
    INFO(dict);
    const fc::NpyArray a = parse(npy_image(dict, data));
    REQUIRE(a.tensor.dtype() == fc::DType::f32);
    REQUIRE(a.tensor.dims() == fc::Dims{3});
    CHECK(a.tensor.get(0) == 1.5);
    CHECK(a.tensor.get(2) == 3.25);
  }
}

TEST_CASE("Versions 2.0 and 3.0 have a four-byte header length", "[npz]") {
  for (int major : {2, 3}) {
    const fc::NpyArray a =
        parse(npy_image("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                        raw<std::int64_t>({-7, 9}), major));
    REQUIRE(a.tensor.dtype() == fc::DType::i64);
    CHECK(a.tensor.data_as<std::int64_t>()[0] == -7);
    CHECK(a.tensor.data_as<std::int64_t>()[1] == 9);
  }
}

TEST_CASE("Shape () is a scalar with one element", "[npz]") {
  const fc::NpyArray a =
      parse(npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': ()}", raw<double>({2.5})));
  CHECK(a.tensor.dims().empty());
  CHECK(a.tensor.numel() == 1);
  CHECK(a.tensor.get(0) == 2.5);
}

TEST_CASE("Every supported dtype maps to its tensor dtype", "[npz]") {
  const std::vector<std::pair<std::string, fc::DType>> cases = {
      {"<f2", fc::DType::f16},     {"<f4", fc::DType::f32}, {"<f8", fc::DType::f64},
      {"|b1", fc::DType::boolean}, {"|u1", fc::DType::u8},  {"<u2", fc::DType::u16},
      {"<i4", fc::DType::i32},     {"<i8", fc::DType::i64}, {">f2", fc::DType::f16},
      {">u2", fc::DType::u16},     {">i8", fc::DType::i64}, {"=f8", fc::DType::f64}};
  for (const auto& [descr, dtype] : cases) {
    INFO(descr);
    const Bytes data(fc::dtype_size(dtype) * 2, 0);
    const fc::NpyArray a =
        parse(npy_image("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,)}", data));
    CHECK(a.tensor.dtype() == dtype);
  }
}

TEST_CASE("Big-endian data is byte-swapped to native", "[npz]") {
  const fc::NpyArray h = parse(npy_image("{'descr': '>f2', 'fortran_order': False, 'shape': (2,)}",
                                         {0x3c, 0x00, 0xc1, 0x00}));  // 1.0, -2.5
  CHECK(h.tensor.get(0) == 1.0);
  CHECK(h.tensor.get(1) == -2.5);
  const fc::NpyArray u =
      parse(npy_image("{'descr': '>u2', 'fortran_order': False, 'shape': (1,)}", {0x12, 0x34}));
  CHECK(u.tensor.data_as<std::uint16_t>()[0] == 0x1234);
}

TEST_CASE("Fortran-ordered arrays of rank 4 are transposed to C order", "[npz]") {
  const fc::Dims dims = {2, 3, 4, 5};
  std::vector<float> column_major(120);
  std::int64_t c_index = 0;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        for (int d = 0; d < 5; ++d)
          column_major[a + 2 * b + 6 * c + 24 * d] = static_cast<float>(c_index++);
  const fc::NpyArray t = parse(npy_image(
      "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4, 5), }", raw(column_major)));
  REQUIRE(t.tensor.dims() == dims);
  for (int i = 0; i < 120; ++i) CHECK(t.tensor.get(i) == i);
}

TEST_CASE("String arrays of shape () or (1,) read as UTF-8 text without trailing NULs", "[npz]") {
  const fc::NpyArray u = parse(npy_image("{'descr': '<U4', 'fortran_order': False, 'shape': ()}",
                                         raw<std::uint32_t>({'o', 0x3bc, 0x1f600, 0})));
  CHECK(u.is_text);
  CHECK(u.text == "o\xce\xbc\xf0\x9f\x98\x80");
  const fc::NpyArray be = parse(npy_image("{'descr': '>U2', 'fortran_order': False, 'shape': (1,)}",
                                          {0, 0, 0, 'h', 0, 0, 0, 'i'}));
  CHECK(be.text == "hi");
  const fc::NpyArray s = parse(
      npy_image("{'descr': '|S5', 'fortran_order': False, 'shape': ()}", {'a', 0, 'b', 0, 0}));
  CHECK(s.text == std::string("a\0b", 3));
}

TEST_CASE("Malformed .npy images are rejected with a one-line message", "[npz]") {
  const Bytes two_floats = raw<float>({1, 2});
  const std::string good_rest = "'fortran_order': False, 'shape': (2,)}";
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"no header end", npy_image("{'descr': '<f4', " + good_rest.substr(0, 20), two_floats)},
      {"missing key", npy_image("{'descr': '<f4', 'shape': (2,)}", two_floats)},
      {"duplicate key", npy_image("{'descr': '<f4', 'descr': '<f4', " + good_rest, two_floats)},
      {"unknown key", npy_image("{'descr': '<f4', 'extra': 1, " + good_rest, two_floats)},
      {"unterminated string", npy_image("{'descr: '<f4', " + good_rest, two_floats)},
      {"negative dimension",
       npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", two_floats)},
      {"shape not a tuple",
       npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': 2}", two_floats)},
      {"fortran_order not a bool",
       npy_image("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", two_floats)},
      {"text after the dict", npy_image("{'descr': '<f4', " + good_rest + " x", two_floats)},
      {"deep nesting",
       npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(200, '(') + "}",
                 two_floats)},
      {"huge shape",
       npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
                 two_floats)},
      {"integer overflow",
       npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
                 two_floats)},
      {"too much data",
       npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", two_floats)},
      {"too little data",
       npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", two_floats)},
      {"no byte order for a wide type", npy_image("{'descr': '|f4', " + good_rest, two_floats)},
      {"string array of two elements", npy_image("{'descr': '<U1', " + good_rest, two_floats)},
      {"surrogate code point", npy_image("{'descr': '<U1', 'fortran_order': False, 'shape': ()}",
                                         raw<std::uint32_t>({0xd800}))},
      {"bad magic", Bytes{'N', 'U', 'M', 'P', 'Y', 1, 0}},
      {"empty", Bytes{}},
      {"version 4.0", npy_image("{'descr': '<f4', " + good_rest, two_floats, 4)},
  };
  for (const auto& [what, image] : cases) {
    INFO(what);
    parse_error(image);
  }
  // A header length that points past the end of the image.
  Bytes cut = npy_image("{'descr': '<f4', " + good_rest, {});
  cut.resize(cut.size() - 5);
  CHECK(parse_error(cut).find("truncated .npy header") != std::string::npos);
}

TEST_CASE("Unsupported dtypes are named in the error", "[npz]") {
  for (const std::string descr : {"<c8", "<i2", "|i1", "<u4", "<M8[ns]", "O", "<f16"}) {
    INFO(descr);
    const std::string message = parse_error(npy_image(
        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,)}", Bytes(16, 0)));
    CHECK(message == "mem.npz: q.npy: unsupported dtype '" + descr + "'");
  }
  const std::string structured = parse_error(
      npy_image("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}", Bytes(4, 0)));
  CHECK(structured == "mem.npz: q.npy: unsupported dtype '[('a', '<i4')]'");
}

TEST_CASE("Every truncation and single-byte flip of a .npy image either parses or throws fc::Error",
          "[npz]") {
  std::vector<Bytes> images = {
      npy_image("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                raw<float>({1, 2, 3, 4, 5, 6})),
      npy_image("{'descr': '>U2', 'fortran_order': False, 'shape': (1,), }",
                {0, 0, 0, 'h', 0, 0, 0, 'i'}),
      npy_image("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", {1}, 3)};
  for (const Bytes& good : images) {
    for (std::size_t length = 0; length <= good.size(); ++length) {
      const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length));
      try {
        parse(cut);
      } catch (const fc::Error& e) {
        check_file_message(e.what(), "mem.npz: q.npy");
      }
    }
    for (std::size_t at = 0; at < good.size(); ++at) {
      for (int mask = 1; mask < 256; mask <<= 1) {
        Bytes bad = good;
        bad[at] ^= static_cast<std::uint8_t>(mask);
        INFO("byte " << at << " ^ " << mask);
        try {
          parse(bad);
        } catch (const fc::Error& e) {
          check_file_message(e.what(), "mem.npz: q.npy");
        }
      }
    }
  }
}

#include "harness/io/h5_file.h"
#include "harness/io/staged_file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <new>
#include <utility>

#include "core/check.h"
#include "core/error.h"

namespace fc {

// ---------------------------------------------------------------------------------------
// H5Handle

H5Handle::H5Handle(H5Handle&& other) noexcept
    : id_(std::exchange(other.id_, H5I_INVALID_HID)), kind_(other.kind_) {}

H5Handle& H5Handle::operator=(H5Handle&& other) noexcept {
  if (this != &other) {
    close();
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    kind_ = other.kind_;
  }
  return *this;
}

herr_t H5Handle::close() noexcept {
  if (id_ < 0) return 0;
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  switch (kind_) {
    case H5Kind::file: return H5Fclose(id);
    case H5Kind::group: return H5Gclose(id);
    case H5Kind::dataset: return H5Dclose(id);
    case H5Kind::dataspace: return H5Sclose(id);
    case H5Kind::datatype: return H5Tclose(id);
    case H5Kind::attribute: return H5Aclose(id);
    case H5Kind::property_list: return H5Pclose(id);
    case H5Kind::object: return H5Oclose(id);
  }
  return -1;
}

void silence_hdf5_error_printing() {
  thread_local bool silenced = false;
  if (!silenced) {
    FC_H5(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr));
    silenced = true;
  }
}

namespace {

// ---------------------------------------------------------------------------------------
// Limits and names

// A dataspace claiming more elements than this is damage or a mistake, not a tensor.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 36;
constexpr hsize_t kMaxAttributeElements = hsize_t{1} << 26;
constexpr std::size_t kMaxStringBytes = std::size_t{1} << 26;
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
constexpr unsigned kDeflateLevel = 4;
constexpr const char* kDtypeAttribute = "dtype";
constexpr const char* kDamaged = "cannot read (damaged file?)";

std::string errno_text(int error) { return std::strerror(error); }

// "/a/b" -> {"a", "b"}; "/" -> {}. nullopt for relative paths, empty components, "." and "..".
std::optional<std::vector<std::string>> split_object_path(const std::string& path) {
  if (path.empty() || path[0] != '/') return std::nullopt;
  std::vector<std::string> parts;
  if (path == "/") return parts;
  std::size_t start = 1;
  while (true) {
    const std::size_t slash = path.find('/', start);
    const std::string part = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return std::nullopt;
    parts.push_back(part);
    if (slash == std::string::npos) return parts;
    start = slash + 1;
  }
}

std::string join_object_path(const std::vector<std::string>& parts, std::size_t count) {
  if (count == 0) return "/";
  std::string path;
  for (std::size_t i = 0; i < count; ++i) path += "/" + parts[i];
  return path;
}

std::string parent_object_path(const std::vector<std::string>& parts) {
  return join_object_path(parts, parts.size() - 1);
}

const char* invalid_path_message() { return "invalid object path (must be absolute, like /inputs/q)"; }

// ---------------------------------------------------------------------------------------
// Finding objects

// The object at a path, opened; or which prefix HDF5 failed on. Neither: missing.
struct Lookup {
  H5Handle object;
  std::optional<std::string> broken_at;
};

// Walks the path one link at a time, so a missing middle group is "missing", not an error.
Lookup look_up(hid_t file, const std::vector<std::string>& parts) {
  Lookup result;
  for (std::size_t depth = 0; depth <= parts.size(); ++depth) {
    const std::string prefix = join_object_path(parts, depth);
    if (depth > 0) {
      const htri_t link = H5Lexists(file, prefix.c_str(), H5P_DEFAULT);
      if (link < 0) return {H5Handle(), prefix};
      if (link == 0) return {};
    }
    H5Handle object(H5Oopen(file, prefix.c_str(), H5P_DEFAULT), H5Kind::object);
    if (!object) {
      // A soft or external link to nothing is missing; an object HDF5 cannot load is damage.
      H5L_info_t link{};
      const bool dangling = depth > 0 && H5Lget_info(file, prefix.c_str(), &link, H5P_DEFAULT) >= 0 &&
                            link.type != H5L_TYPE_HARD;
      if (dangling) return {};
      return {H5Handle(), prefix};
    }
    if (depth == parts.size()) {
      result.object = std::move(object);
      return result;
    }
    const H5I_type_t type = H5Iget_type(object.get());
    if (type == H5I_BADID) return {H5Handle(), prefix};
    if (type != H5I_GROUP) return {};  // the path goes through a dataset
  }
  return result;
}

// ---------------------------------------------------------------------------------------
// Datatypes

H5Handle copy_type(hid_t type) { return H5Handle(H5Tcopy(type), H5Kind::datatype); }

// A 16-bit float: sign bit 15, exponent [mantissa_bits, 15), mantissa [0, mantissa_bits).
// Built from a 32-bit float so the byte order is the base's (LE for files, native in memory).
H5Handle float16_type(hid_t float32_base, std::size_t exponent_bits, std::size_t mantissa_bits,
                      std::size_t exponent_bias) {
  H5Handle type = copy_type(float32_base);
  if (!type) return type;
  const bool ok = H5Tset_fields(type.get(), 15, mantissa_bits, exponent_bits, 0, mantissa_bits) >= 0 &&
                  H5Tset_size(type.get(), 2) >= 0 && H5Tset_precision(type.get(), 16) >= 0 &&
                  H5Tset_ebias(type.get(), exponent_bias) >= 0;
  if (!ok) return H5Handle();
  return type;
}

H5Handle ieee_half_type(hid_t float32_base) { return float16_type(float32_base, 5, 10, 15); }
H5Handle bfloat16_float_type(hid_t float32_base) { return float16_type(float32_base, 8, 7, 127); }

H5Handle file_type_of(DType t) {
  switch (t) {
    case DType::f16: return ieee_half_type(H5T_IEEE_F32LE);
    case DType::bf16: return copy_type(H5T_STD_U16LE);
    case DType::f32: return copy_type(H5T_IEEE_F32LE);
    case DType::f64: return copy_type(H5T_IEEE_F64LE);
    case DType::boolean: return copy_type(H5T_STD_U8LE);
    case DType::i32: return copy_type(H5T_STD_I32LE);
    case DType::i64: return copy_type(H5T_STD_I64LE);
    case DType::u8: return copy_type(H5T_STD_U8LE);
    case DType::u16: return copy_type(H5T_STD_U16LE);
  }
  return H5Handle();
}

H5Handle memory_type_of(DType t) {
  switch (t) {
    case DType::f16: return ieee_half_type(H5T_NATIVE_FLOAT);
    case DType::bf16: return copy_type(H5T_NATIVE_UINT16);
    case DType::f32: return copy_type(H5T_NATIVE_FLOAT);
    case DType::f64: return copy_type(H5T_NATIVE_DOUBLE);
    case DType::boolean: return copy_type(H5T_NATIVE_UINT8);
    case DType::i32: return copy_type(H5T_NATIVE_INT32);
    case DType::i64: return copy_type(H5T_NATIVE_INT64);
    case DType::u8: return copy_type(H5T_NATIVE_UINT8);
    case DType::u16: return copy_type(H5T_NATIVE_UINT16);
  }
  return H5Handle();
}

// The `dtype` attribute that tells a reader how to interpret an integer dataset.
const char* storage_tag_of(DType t) {
  if (t == DType::bf16) return "bfloat16";
  if (t == DType::boolean) return "bool";
  return nullptr;
}

H5Handle utf8_string_type() {
  H5Handle type = copy_type(H5T_C_S1);
  if (!type) return type;
  if (H5Tset_size(type.get(), H5T_VARIABLE) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    return H5Handle();
  }
  return type;
}

const char* type_class_name(H5T_class_t cls) {
  switch (cls) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_TIME: return "time";
    case H5T_STRING: return "string";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_COMPOUND: return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_ENUM: return "enum";
    case H5T_VLEN: return "vlen";
    case H5T_ARRAY: return "array";
    default: return "unknown";
  }
}

// ---------------------------------------------------------------------------------------
// Dataspaces and chunks

H5Handle dataspace_for(const Dims& dims) {
  if (dims.empty()) return H5Handle(H5Screate(H5S_SCALAR), H5Kind::dataspace);
  const std::vector<hsize_t> extent(dims.begin(), dims.end());
  return H5Handle(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr),
                  H5Kind::dataspace);
}

// The dataset's dims with the leading ones halved (rounding up) until a chunk is <= 1 MiB.
std::vector<hsize_t> chunk_shape(const Dims& dims, std::size_t element_size) {
  std::vector<hsize_t> chunk(dims.begin(), dims.end());
  auto chunk_bytes = [&chunk, element_size] {
    hsize_t bytes = element_size;
    for (hsize_t d : chunk) bytes *= d;
    return bytes;
  };
  for (hsize_t& d : chunk) {
    while (chunk_bytes() > kChunkBytes && d > 1) d = (d + 1) / 2;
  }
  return chunk;
}

// Dataset creation properties: no timestamps (identical inputs give identical files), and
// for non-empty arrays chunking with shuffle + deflate.
H5Handle dataset_creation_properties(DType dtype, const Dims& dims) {
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Kind::property_list);
  if (!dcpl || H5Pset_obj_track_times(dcpl.get(), 0) < 0) return H5Handle();
  if (dims.empty() || numel_of(dims) == 0) return dcpl;
  const std::vector<hsize_t> chunk = chunk_shape(dims, dtype_size(dtype));
  const bool ok = H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) >= 0 &&
                  H5Pset_shuffle(dcpl.get()) >= 0 && H5Pset_deflate(dcpl.get(), kDeflateLevel) >= 0;
  if (!ok) return H5Handle();
  return dcpl;
}

H5Handle group_creation_properties() {
  H5Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Kind::property_list);
  if (!gcpl || H5Pset_obj_track_times(gcpl.get(), 0) < 0) return H5Handle();
  return gcpl;
}

// Shape of a dataspace: rank 0 for scalars; nullopt for the null dataspace or a failure.
struct Extent {
  bool ok = false;
  bool null_space = false;
  std::vector<hsize_t> dims;
};

Extent extent_of(hid_t space) {
  Extent extent;
  const H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_SCALAR) {
    extent.ok = true;
  } else if (cls == H5S_NULL) {
    extent.ok = true;
    extent.null_space = true;
  } else if (cls == H5S_SIMPLE) {
    const int rank = H5Sget_simple_extent_ndims(space);
    if (rank < 0 || rank > H5S_MAX_RANK) return extent;
    extent.dims.resize(static_cast<std::size_t>(rank));
    if (rank > 0 && H5Sget_simple_extent_dims(space, extent.dims.data(), nullptr) != rank) return extent;
    extent.ok = true;
  }
  return extent;
}

// Element count, or nullopt when it exceeds `limit` (checked without overflow).
std::optional<hsize_t> bounded_element_count(const std::vector<hsize_t>& dims, hsize_t limit) {
  hsize_t count = 1;
  for (hsize_t d : dims) {
    if (d > limit) return std::nullopt;
    if (d == 0) count = 0;
  }
  if (count == 0) return 0;
  for (hsize_t d : dims) {
    if (count > limit / d) return std::nullopt;
    count *= d;
  }
  return count;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// H5Writer

H5Writer::H5Writer(std::string final_path) : staged_(std::move(final_path)) {
  silence_hdf5_error_printing();
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Kind::property_list);
  // The 1.8 object formats carry checksums on all metadata, so a damaged file fails to
  // open instead of being parsed; every HDF5 >= 1.8 and h5py read them.
  const bool ok = fapl && H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0 &&
                  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) >= 0;
  // No modification times on the root group either, as on every object we create.
  H5Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Kind::property_list);
  if (!ok || !fcpl || H5Pset_obj_track_times(fcpl.get(), 0) < 0) {
    fail("", "cannot write (HDF5 file properties failed)");
  }
  file_ = H5Handle(H5Fcreate(staged_.temp_path().c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Kind::file);
  if (!file_) fail("", "cannot write (HDF5 could not create " + staged_.temp_path() + ")");
}

H5Writer::~H5Writer() { file_.close(); }  // before staged_ removes an uncommitted file

void H5Writer::fail(const std::string& object, const std::string& what) const {
  throw file_error(staged_.path(), object.empty() ? what : object + ": " + what);
}

void H5Writer::require_space(const std::string& object, std::size_t bytes) const {
  constexpr double kMetadataBytes = 1 << 20;
  // The process's file size limit (ulimit -f) fails a write as a full disk does.
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    hsize_t size = 0;
    if (!file_ || H5Fget_filesize(file_.get(), &size) < 0) size = 0;
    const double largest = static_cast<double>(limit.rlim_cur);
    if (static_cast<double>(size) + static_cast<double>(bytes) + kMetadataBytes > largest) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "cannot write: %.1f MiB to write and 1 MiB of metadata after %.1f MiB, the file size limit "
                    "(ulimit -f) is %.1f MiB",
                    static_cast<double>(bytes) / (1 << 20), static_cast<double>(size) / (1 << 20), largest / (1 << 20));
      fail(object, text);
    }
  }
  struct statvfs fs {};
  if (::statvfs(staged_.temp_path().c_str(), &fs) != 0) return;  // unknown: the write itself will tell
  const double free_bytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  if (free_bytes < static_cast<double>(bytes) + kMetadataBytes) {
    char text[160];
    std::snprintf(text, sizeof text, "cannot write: %.1f MiB to write and 1 MiB of metadata, %.1f MiB free on its file system",
                  static_cast<double>(bytes) / (1 << 20), free_bytes / (1 << 20));
    fail(object, text);
  }
}

void H5Writer::require_open(const std::string& object) const {
  if (staged_.committed() || !file_) fail(object, "cannot write (the file was already committed)");
}

H5Handle H5Writer::open_object(const std::string& object_path) const {
  const auto parts = split_object_path(object_path);
  if (!parts) fail(object_path, invalid_path_message());
  Lookup found = look_up(file_.get(), *parts);
  if (found.broken_at) fail(*found.broken_at, "cannot open");
  if (!found.object) fail(object_path, "no such group or dataset");
  return std::move(found.object);
}

void H5Writer::ensure_group(const std::string& group_path) {
  require_open(group_path);
  const auto parts = split_object_path(group_path);
  if (!parts) fail(group_path, invalid_path_message());
  for (std::size_t depth = 1; depth <= parts->size(); ++depth) {
    const std::string prefix = join_object_path(*parts, depth);
    const htri_t link = H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT);
    if (link < 0) fail(prefix, "cannot write (link lookup failed)");
    if (link > 0) {
      H5Handle object(H5Oopen(file_.get(), prefix.c_str(), H5P_DEFAULT), H5Kind::object);
      if (!object) fail(prefix, "cannot open");
      if (H5Iget_type(object.get()) != H5I_GROUP) fail(prefix, "exists and is not a group");
      continue;
    }
    H5Handle gcpl = group_creation_properties();
    if (!gcpl) fail(prefix, "cannot write (group creation properties failed)");
    H5Handle group(H5Gcreate2(file_.get(), prefix.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                   H5Kind::group);
    if (!group) fail(prefix, "cannot create group");
  }
}

void H5Writer::write_tensor(const std::string& dataset_path, const HostTensor& t) {
  const std::size_t expected_bytes = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
  if (t.empty() || t.nbytes() != expected_bytes) {
    fail(dataset_path, "cannot write a tensor holding " + std::to_string(t.nbytes()) + " bytes as " +
                           dtype_name(t.dtype()) + " " + dims_string(t.dims()));
  }
  create_dataset(dataset_path, t.dtype(), t.dims());
  if (t.numel() > 0) write_block(dataset_path, Dims(t.dims().size(), 0), t);
}

void H5Writer::create_dataset(const std::string& dataset_path, DType dtype, const Dims& dims) {
  require_open(dataset_path);
  const auto parts = split_object_path(dataset_path);
  if (!parts) fail(dataset_path, invalid_path_message());
  if (parts->empty()) fail(dataset_path, "the root group cannot be a dataset");
  if (dims.size() > H5S_MAX_RANK) fail(dataset_path, "rank " + std::to_string(dims.size()) + " exceeds HDF5's 32");

  ensure_group(parent_object_path(*parts));
  const htri_t taken = H5Lexists(file_.get(), dataset_path.c_str(), H5P_DEFAULT);
  if (taken != 0) fail(dataset_path, taken > 0 ? "already exists" : "cannot write (link lookup failed)");

  H5Handle file_type = file_type_of(dtype);
  H5Handle space = dataspace_for(dims);
  H5Handle dcpl = dataset_creation_properties(dtype, dims);
  if (!file_type || !space || !dcpl) fail(dataset_path, "cannot write (HDF5 type, dataspace or property setup failed)");
  H5Handle dataset(H5Dcreate2(file_.get(), dataset_path.c_str(), file_type.get(), space.get(),
                              H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                   H5Kind::dataset);
  if (!dataset) fail(dataset_path, "cannot create dataset");
  if (const char* tag = storage_tag_of(dtype)) set_attribute(dataset_path, kDtypeAttribute, tag);
}

void H5Writer::write_block(const std::string& dataset_path, const Dims& offset, const HostTensor& block) {
  require_open(dataset_path);
  const std::size_t expected_bytes = static_cast<std::size_t>(block.numel()) * dtype_size(block.dtype());
  if (block.nbytes() != expected_bytes || block.dims().size() != offset.size()) {
    fail(dataset_path, "cannot write a block " + dims_string(block.dims()) + " at an offset of rank " +
                           std::to_string(offset.size()));
  }
  if (block.numel() == 0) return;
  H5Handle dataset(H5Dopen2(file_.get(), dataset_path.c_str(), H5P_DEFAULT), H5Kind::dataset);
  if (!dataset) fail(dataset_path, "cannot open dataset to write a block");
  H5Handle file_space(H5Dget_space(dataset.get()), H5Kind::dataspace);
  H5Handle memory_type = memory_type_of(block.dtype());
  H5Handle memory_space = dataspace_for(block.dims());
  if (!file_space || !memory_type || !memory_space) fail(dataset_path, "cannot write a block (HDF5 setup failed)");
  if (!offset.empty()) {
    const std::vector<hsize_t> start(offset.begin(), offset.end()), count(block.dims().begin(), block.dims().end());
    if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Sselect_valid(file_space.get()) <= 0) {
      fail(dataset_path, "block " + dims_string(block.dims()) + " at " + dims_string(offset) + " lies outside the dataset");
    }
  }
  require_space(dataset_path, block.nbytes());
  if (H5Dwrite(dataset.get(), memory_type.get(), memory_space.get(), file_space.get(), H5P_DEFAULT, block.data()) < 0) {
    fail(dataset_path, "cannot write data");
  }
}

void H5Writer::put_attribute(const std::string& object_path, const std::string& name, hid_t file_type,
                             hid_t mem_type, hid_t space, const void* data) {
  require_open(object_path);
  const std::string what = "attribute '" + name + "'";
  if (name.empty()) fail(object_path, "attribute names cannot be empty");
  H5Handle object = open_object(object_path);
  const htri_t present = H5Aexists(object.get(), name.c_str());
  if (present < 0) fail(object_path, what + ": cannot write (lookup failed)");
  if (present > 0 && H5Adelete(object.get(), name.c_str()) < 0) {
    fail(object_path, what + ": cannot replace the existing one");
  }
  H5Handle attribute(H5Acreate2(object.get(), name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT),
                     H5Kind::attribute);
  if (!attribute) fail(object_path, what + ": cannot create");
  const hssize_t count = H5Sget_simple_extent_npoints(space);
  if (count < 0) fail(object_path, what + ": cannot write (bad dataspace)");
  if (count > 0 && H5Awrite(attribute.get(), mem_type, data) < 0) fail(object_path, what + ": cannot write");
}

void H5Writer::set_attribute(const std::string& object_path, const std::string& name,
                             const std::string& value) {
  if (value.find('\0') != std::string::npos) {
    fail(object_path, "attribute '" + name + "': strings cannot contain NUL bytes");
  }
  H5Handle type = utf8_string_type();
  H5Handle space(H5Screate(H5S_SCALAR), H5Kind::dataspace);
  if (!type || !space) fail(object_path, "attribute '" + name + "': cannot set up its type");
  const char* text = value.c_str();
  put_attribute(object_path, name, type.get(), type.get(), space.get(), &text);
}

void H5Writer::set_attribute(const std::string& object_path, const std::string& name, const char* value) {
  set_attribute(object_path, name, std::string(value == nullptr ? "" : value));
}

void H5Writer::set_attribute(const std::string& object_path, const std::string& name, std::int64_t value) {
  H5Handle space(H5Screate(H5S_SCALAR), H5Kind::dataspace);
  if (!space) fail(object_path, "attribute '" + name + "': cannot set up its dataspace");
  put_attribute(object_path, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(), &value);
}

void H5Writer::set_attribute(const std::string& object_path, const std::string& name, double value) {
  H5Handle space(H5Screate(H5S_SCALAR), H5Kind::dataspace);
  if (!space) fail(object_path, "attribute '" + name + "': cannot set up its dataspace");
  put_attribute(object_path, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.get(), &value);
}

void H5Writer::set_attribute(const std::string& object_path, const std::string& name,
                             const std::vector<std::int64_t>& value) {
  H5Handle space = dataspace_for({static_cast<std::int64_t>(value.size())});
  if (!space) fail(object_path, "attribute '" + name + "': cannot set up its dataspace");
  put_attribute(object_path, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(), value.data());
}

void H5Writer::set_attribute(const std::string& object_path, const std::string& name,
                             const std::vector<double>& value) {
  H5Handle space = dataspace_for({static_cast<std::int64_t>(value.size())});
  if (!space) fail(object_path, "attribute '" + name + "': cannot set up its dataspace");
  put_attribute(object_path, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.get(), value.data());
}

void H5Writer::commit() {
  require_open("");
  if (file_.close() < 0) fail("", "cannot write (closing the file failed)");
  staged_.commit();
}

// ---------------------------------------------------------------------------------------
// H5Reader

namespace {


bool has_float16_layout(hid_t type, std::size_t exponent_bits, std::size_t mantissa_bits,
                        std::size_t exponent_bias) {
  std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  return H5Tget_precision(type) == 16 && H5Tget_offset(type) == 0 && spos == 15 &&
         epos == mantissa_bits && esize == exponent_bits && mpos == 0 && msize == mantissa_bits &&
         H5Tget_ebias(type) == exponent_bias;
}

// h5py stores numpy bool as an enum over int8 with FALSE = 0 and TRUE = 1.
bool is_h5py_bool_enum(hid_t type) {
  if (H5Tget_size(type) != 1 || H5Tget_nmembers(type) != 2) return false;
  for (const auto& [name, expected] : {std::pair<const char*, std::int8_t>{"FALSE", 0}, {"TRUE", 1}}) {
    std::int8_t value = -1;
    if (H5Tenum_valueof(type, name, &value) < 0 || value != expected) return false;
  }
  return true;
}

// A filter of the dataset that this HDF5 library does not have (h5py's lzf, blosc, ...):
// "32000 (lzf)". Explains a failed read better than "damaged". (h5py marks lzf optional,
// yet chunks it compressed cannot be read without it, so optional filters count too.)
std::optional<std::string> unavailable_filter(hid_t dataset) {
  H5Handle dcpl(H5Dget_create_plist(dataset), H5Kind::property_list);
  if (!dcpl) return std::nullopt;
  const int count = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < count; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t value_count = 0;
    char name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &value_count, nullptr,
                                           sizeof name, name, &config);
    if (id < 0) return std::nullopt;
    if (H5Zfilter_avail(id) <= 0) {
      name[sizeof name - 1] = '\0';
      return std::to_string(id) + (name[0] != '\0' ? " (" + std::string(name) + ")" : std::string());
    }
  }
  return std::nullopt;
}

// H5Literate callback: appends the link name to a std::vector<std::string>.
herr_t collect_link_name(hid_t, const char* name, const H5L_info_t*, void* names) noexcept {
  try {
    static_cast<std::vector<std::string>*>(names)->emplace_back(name);
    return 0;
  } catch (...) {
    return -1;  // no exception may cross HDF5's C frames
  }
}

std::string integer_name(H5T_sign_t sign, std::size_t size) {
  return std::string(sign == H5T_SGN_NONE ? "uint" : "int") + std::to_string(size * 8);
}

// What a dataset's file type maps to and the memory type to read it through, or why it
// cannot be read.
struct StoredType {
  DType dtype = DType::f64;
  H5Handle memory_type;
  std::string problem;
};

StoredType unsupported_type(const std::string& what) {
  StoredType stored;
  stored.problem = "unsupported datatype (" + what + ")";
  return stored;
}

StoredType damaged_type() {
  StoredType stored;
  stored.problem = kDamaged;
  return stored;
}

// By type class and size; integers of 1 and 2 bytes also by the `dtype` attribute, read
// through storage_tag() only when it matters.
StoredType stored_type_of(hid_t file_type, const std::function<std::string()>& storage_tag) {
  const H5T_class_t cls = H5Tget_class(file_type);
  const std::size_t size = H5Tget_size(file_type);
  if (cls == H5T_NO_CLASS || size == 0) return damaged_type();
  StoredType stored;
  if (cls == H5T_FLOAT) {
    if (size == 8) {
      stored.dtype = DType::f64;
    } else if (size == 4) {
      stored.dtype = DType::f32;
    } else if (size == 2 && has_float16_layout(file_type, 5, 10, 15)) {
      stored.dtype = DType::f16;
    } else if (size == 2 && has_float16_layout(file_type, 8, 7, 127)) {
      stored.dtype = DType::bf16;  // bfloat16 declared as a float type (HDF5 2.0 does this)
      stored.memory_type = bfloat16_float_type(H5T_NATIVE_FLOAT);
    } else {
      return unsupported_type("float" + std::to_string(size * 8) + (size == 2 ? " with a non-IEEE layout" : ""));
    }
  } else if (cls == H5T_INTEGER) {
    const H5T_sign_t sign = H5Tget_sign(file_type);
    if (sign == H5T_SGN_ERROR) return damaged_type();
    const bool is_unsigned = sign == H5T_SGN_NONE;
    if (is_unsigned && size == 1) {
      stored.dtype = storage_tag() == "bool" ? DType::boolean : DType::u8;
    } else if (is_unsigned && size == 2) {
      stored.dtype = storage_tag() == "bfloat16" ? DType::bf16 : DType::u16;
    } else if (!is_unsigned && size == 4) {
      stored.dtype = DType::i32;
    } else if (!is_unsigned && size == 8) {
      stored.dtype = DType::i64;
    } else {
      return unsupported_type(integer_name(sign, size));
    }
  } else if (cls == H5T_ENUM && is_h5py_bool_enum(file_type)) {
    stored.dtype = DType::boolean;
    stored.memory_type = copy_type(file_type);  // HDF5 does not convert enum to integer
  } else {
    return unsupported_type(type_class_name(cls));
  }
  if (!stored.memory_type) stored.memory_type = memory_type_of(stored.dtype);
  if (!stored.memory_type) stored.problem = "cannot read (memory datatype setup failed)";
  return stored;
}

// A dataset's dims and element count, or why it cannot be read.
struct StoredShape {
  std::vector<hsize_t> dims;
  hsize_t count = 0;
  std::string problem;
};

StoredShape stored_shape_of(hid_t dataset) {
  StoredShape shape;
  H5Handle space(H5Dget_space(dataset), H5Kind::dataspace);
  const Extent extent = space ? extent_of(space.get()) : Extent{};
  if (!extent.ok) {
    shape.problem = kDamaged;
  } else if (extent.null_space) {
    shape.problem = "unsupported dataspace (null: no shape, no data)";
  } else if (const auto count = bounded_element_count(extent.dims, static_cast<hsize_t>(kMaxElements))) {
    shape.dims = extent.dims;
    shape.count = *count;
  } else {
    shape.problem = "too large (more than 2^36 elements)";
  }
  return shape;
}

}  // namespace

H5Reader::H5Reader(std::string path) : path_(std::move(path)) {
  silence_hdf5_error_printing();
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) fail("", "no such file");
    fail("", "cannot read (" + errno_text(error) + ")");
  }
  if (S_ISDIR(info.st_mode)) fail("", "not an HDF5 file (a directory)");
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("", "cannot read (" + errno_text(errno) + ")");
  ::close(fd);

  const htri_t is_hdf5 = H5Fis_hdf5(path_.c_str());
  if (is_hdf5 == 0) fail("", "not an HDF5 file");
  if (is_hdf5 < 0) fail("", "cannot open (truncated or damaged)");
  file_ = H5Handle(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Kind::file);
  if (!file_) fail("", "cannot open (truncated or damaged)");
  note_input_file(path_);
}

void H5Reader::fail(const std::string& object, const std::string& what) const {
  throw file_error(path_, object.empty() ? what : object + ": " + what);
}

H5Handle H5Reader::find(const std::string& object_path) const {
  const auto parts = split_object_path(object_path);
  if (!parts) fail(object_path, invalid_path_message());
  Lookup found = look_up(file_.get(), *parts);
  if (found.broken_at) fail(*found.broken_at, kDamaged);
  return std::move(found.object);
}

bool H5Reader::exists(const std::string& object_path) const { return static_cast<bool>(find(object_path)); }

H5Handle H5Reader::open_object(const std::string& object_path, const char* missing_what) const {
  H5Handle object = find(object_path);
  if (!object) fail(object_path, missing_what);
  return object;
}

HostTensor H5Reader::read_tensor(const std::string& dataset_path) const {
  H5Handle dataset = open_object(dataset_path, "missing dataset");
  if (H5Iget_type(dataset.get()) != H5I_DATASET) fail(dataset_path, "not a dataset");

  H5Handle file_type(H5Dget_type(dataset.get()), H5Kind::datatype);
  if (!file_type) fail(dataset_path, kDamaged);
  StoredType stored = stored_type_of(file_type.get(), [&] {
    return string_attribute(dataset_path, kDtypeAttribute).value_or("");
  });
  if (!stored.problem.empty()) fail(dataset_path, stored.problem);

  const StoredShape shape = stored_shape_of(dataset.get());
  if (!shape.problem.empty()) fail(dataset_path, shape.problem);
  const Dims dims(shape.dims.begin(), shape.dims.end());
  HostTensor tensor;
  try {
    tensor = HostTensor(stored.dtype, dims);
  } catch (const std::bad_alloc&) {
    fail(dataset_path, "cannot allocate " + std::to_string(shape.count * dtype_size(stored.dtype)) +
                           " bytes for " + dims_string(dims));
  }
  if (shape.count > 0 && H5Dread(dataset.get(), stored.memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                 tensor.data()) < 0) {
    if (const auto filter = unavailable_filter(dataset.get())) {
      fail(dataset_path, "cannot read (needs HDF5 filter " + *filter + ", which this HDF5 library lacks)");
    }
    fail(dataset_path, kDamaged);
  }
  if (stored.dtype == DType::boolean) {
    auto* bytes = tensor.data_as<std::uint8_t>();
    for (hsize_t i = 0; i < shape.count; ++i) bytes[i] = bytes[i] != 0 ? 1 : 0;
  }
  return tensor;
}

std::vector<std::string> H5Reader::children(const std::string& group_path) const {
  H5Handle group = open_object(group_path, "missing group");
  if (H5Iget_type(group.get()) != H5I_GROUP) fail(group_path, "not a group");
  // In native order HDF5 walks its link index directly. Any other order (and
  // H5Lget_name_by_idx) first builds a table of all links, and HDF5 1.10 frees garbage
  // pointers when that fails half-way on a damaged file; so walk natively and sort here.
  std::vector<std::string> names;
  hsize_t position = 0;
  if (H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_NATIVE, &position, collect_link_name, &names) < 0) {
    fail(group_path, kDamaged);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// ---------------------------------------------------------------------------------------
// Attributes

H5Handle H5Reader::open_attribute(const std::string& object_path, const std::string& name) const {
  H5Handle object = open_object(object_path, "missing group or dataset");
  const htri_t present = H5Aexists(object.get(), name.c_str());
  if (present < 0) fail(object_path, "attribute '" + name + "': " + kDamaged);
  if (present == 0) return H5Handle();
  H5Handle attribute(H5Aopen(object.get(), name.c_str(), H5P_DEFAULT), H5Kind::attribute);
  if (!attribute) fail(object_path, "attribute '" + name + "': " + kDamaged);
  return attribute;
}

namespace {

// ---------------------------------------------------------------------------------------
// Global heap guard
//
// Variable-length strings live in global heap collections, which carry no checksum, and
// HDF5 1.10 trusts them: a damaged object size there makes H5Aread copy out of bounds
// (SIGSEGV) or loop forever. So before HDF5 reads a variable-length string attribute we
// take its raw heap reference (a conversion function hands back the stored bytes
// unconverted), read the collection it points into ourselves, and walk it the way HDF5
// will; only an intact collection holding exactly that string is passed on to H5Aread.

constexpr const char* kReferenceCaptureTag = "fc.h5_file.vlen-string-reference";
constexpr std::size_t kReferenceCaptureSize = 16;  // length (4) + collection address (<= 8) + index (4)
constexpr std::uint64_t kMinCollectionBytes = 4096;  // HDF5's H5HG_MINSIZE

H5Handle reference_capture_type() {
  H5Handle type(H5Tcreate(H5T_OPAQUE, kReferenceCaptureSize), H5Kind::datatype);
  if (!type || H5Tset_tag(type.get(), kReferenceCaptureTag) < 0) return H5Handle();
  return type;
}

bool is_reference_capture_type(hid_t type) {
  if (H5Tget_class(type) != H5T_OPAQUE) return false;
  char* tag = H5Tget_tag(type);
  if (tag == nullptr) return false;
  const bool match = std::strcmp(tag, kReferenceCaptureTag) == 0;
  const bool freed = H5free_memory(tag) >= 0;
  return match && freed;
}

// An HDF5 soft conversion from a variable-length string to our tagged opaque type that
// leaves the stored reference bytes as they are. It declines every other conversion.
herr_t keep_reference_bytes(hid_t source, hid_t destination, H5T_cdata_t* cdata, std::size_t count,
                            std::size_t, std::size_t, void* buffer, void*, hid_t) {
  switch (cdata->command) {
    case H5T_CONV_INIT: {
      cdata->need_bkg = H5T_BKG_NO;
      const std::size_t size = H5Tget_size(source);
      const bool ours = H5Tis_variable_str(source) > 0 && is_reference_capture_type(destination) &&
                        size > 0 && size <= kReferenceCaptureSize;
      return ours ? 0 : -1;
    }
    case H5T_CONV_CONV: {
      if (count == 0) return 0;
      const std::size_t size = H5Tget_size(source);
      if (count != 1 || buffer == nullptr || size == 0 || size > kReferenceCaptureSize) return -1;
      std::memset(static_cast<char*>(buffer) + size, 0, kReferenceCaptureSize - size);
      return 0;
    }
    case H5T_CONV_FREE: return 0;
  }
  return -1;
}

bool reference_capture_registered() {
  static const bool registered = [] {
    H5Handle any_variable_string = utf8_string_type();  // soft conversions match by class
    H5Handle capture = reference_capture_type();
    return any_variable_string && capture &&
           H5Tregister(H5T_PERS_SOFT, "fc_keep_vlen_string_reference", any_variable_string.get(), capture.get(),
                       keep_reference_bytes) >= 0;
  }();
  return registered;
}

std::uint64_t little_endian(const unsigned char* bytes, std::size_t size) {
  std::uint64_t value = 0;
  for (std::size_t i = size; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

std::uint64_t align8(std::uint64_t n) { return (n + 7) / 8 * 8; }

struct HeapReference {
  std::uint64_t length = 0;      // characters
  std::uint64_t collection = 0;  // address, relative to the file's base
  std::uint64_t index = 0;
};

struct FileGeometry {
  std::uint64_t base = 0;  // the user block precedes the HDF5 data
  std::size_t address_size = 0;
  std::size_t length_size = 0;
};

std::optional<FileGeometry> geometry_of(hid_t file) {
  H5Handle fcpl(H5Fget_create_plist(file), H5Kind::property_list);
  FileGeometry geometry;
  hsize_t user_block = 0;
  if (!fcpl || H5Pget_userblock(fcpl.get(), &user_block) < 0 ||
      H5Pget_sizes(fcpl.get(), &geometry.address_size, &geometry.length_size) < 0) {
    return std::nullopt;
  }
  geometry.base = user_block;
  const bool usual = (geometry.address_size == 4 || geometry.address_size == 8) &&
                     (geometry.length_size == 4 || geometry.length_size == 8);
  if (!usual) return std::nullopt;
  return geometry;
}

std::optional<HeapReference> capture_reference(hid_t attribute, const FileGeometry& geometry) {
  H5Handle capture = reference_capture_type();
  if (!capture || !reference_capture_registered()) return std::nullopt;
  unsigned char raw[kReferenceCaptureSize] = {};
  if (H5Aread(attribute, capture.get(), raw) < 0) return std::nullopt;
  HeapReference reference;
  reference.length = little_endian(raw, 4);
  reference.collection = little_endian(raw + 4, geometry.address_size);
  reference.index = little_endian(raw + 4 + geometry.address_size, 4);
  return reference;
}

// Reads `size` bytes at `offset`; nullopt when the file is shorter.
std::optional<std::string> read_file_bytes(std::ifstream& in, std::uint64_t offset, std::uint64_t size) {
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) return std::nullopt;
  return bytes;
}

// Walks the collection as HDF5's H5HG cache deserializer does and answers whether it is
// well formed and holds object `reference.index` of exactly `reference.length` bytes.
bool collection_holds(const std::string& collection, const FileGeometry& geometry, const HeapReference& reference) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(collection.data());
  const std::uint64_t size = collection.size();
  const std::uint64_t object_header = 8 + geometry.length_size;  // index, references, reserved, size
  std::optional<std::uint64_t> found_size;
  std::uint64_t p = align8(8 + geometry.length_size);  // signature, version, reserved, size
  while (p < size) {
    if (p + object_header > size) break;  // a tail too small for an object is free space
    const std::uint64_t index = little_endian(bytes + p, 2);
    const std::uint64_t object_size = little_endian(bytes + p + 8, geometry.length_size);
    if (object_size > size) return false;
    // Objects are padded to 8 bytes; the free-space object (index 0) counts its header.
    const std::uint64_t need = index > 0 ? object_header + align8(object_size) : object_size;
    if (need < object_header || p + need > size) return false;  // would loop or overrun
    if (index == reference.index) found_size = object_size;  // a later duplicate wins, as in HDF5
    p += need;
  }
  return found_size == reference.length;
}

// True when HDF5 can read this single variable-length string attribute safely.
bool variable_string_is_intact(hid_t attribute, hid_t file, const std::string& file_path) {
  const std::optional<FileGeometry> geometry = geometry_of(file);
  if (!geometry) return false;
  const std::optional<HeapReference> reference = capture_reference(attribute, *geometry);
  if (!reference) return false;
  if (reference->collection == 0) return reference->length == 0;  // empty: nothing on the heap
  if (reference->index == 0 || reference->length > kMaxStringBytes) return false;

  std::ifstream in(file_path, std::ios::binary);
  if (!in) return false;
  in.seekg(0, std::ios::end);
  const std::uint64_t file_size = static_cast<std::uint64_t>(in.tellg());
  const std::uint64_t offset = geometry->base + reference->collection;
  if (offset < reference->collection || offset >= file_size) return false;

  const std::uint64_t prefix_size = 8 + geometry->length_size;
  const std::optional<std::string> prefix = read_file_bytes(in, offset, prefix_size);
  if (!prefix || prefix->compare(0, 5, std::string("GCOL\1", 5)) != 0) return false;
  const std::uint64_t collection_size =
      little_endian(reinterpret_cast<const unsigned char*>(prefix->data()) + 8, geometry->length_size);
  const std::uint64_t largest = kMaxStringBytes + kMinCollectionBytes;
  if (collection_size < kMinCollectionBytes || collection_size > largest || collection_size > file_size - offset) {
    return false;
  }
  const std::optional<std::string> collection = read_file_bytes(in, offset, collection_size);
  return collection && collection_holds(*collection, *geometry, *reference);
}

// Throws "FILE: OBJECT: what" for one attribute.
struct AttributeFailure {
  const std::string& file_path;
  hid_t file;
  std::string object;  // "/stages/qk: attribute 'scale'"
  [[noreturn]] void operator()(const std::string& what) const {
    throw file_error(file_path, object + ": " + what);
  }
};

struct AttributeShape {
  H5Handle type;
  H5T_class_t cls = H5T_NO_CLASS;
  std::size_t rank = 0;
  hsize_t count = 0;  // number of values; 0 for the null dataspace
};

AttributeShape inspect_attribute(hid_t attribute, const AttributeFailure& fail) {
  AttributeShape shape;
  shape.type = H5Handle(H5Aget_type(attribute), H5Kind::datatype);
  if (!shape.type) fail(kDamaged);
  shape.cls = H5Tget_class(shape.type.get());
  if (shape.cls == H5T_NO_CLASS) fail(kDamaged);
  H5Handle space(H5Aget_space(attribute), H5Kind::dataspace);
  if (!space) fail(kDamaged);
  const Extent extent = extent_of(space.get());
  if (!extent.ok) fail(kDamaged);
  if (extent.null_space) return shape;
  const auto count = bounded_element_count(extent.dims, kMaxAttributeElements);
  if (!count) fail("too large (more than 2^26 values)");
  shape.rank = extent.dims.size();
  shape.count = *count;
  return shape;
}

[[noreturn]] void fail_wrong_type(const AttributeShape& shape, const char* expected,
                                  const AttributeFailure& fail) {
  fail(std::string("wrong type (") + type_class_name(shape.cls) + ", expected " + expected + ")");
}

void require_single_value(const AttributeShape& shape, const AttributeFailure& fail) {
  if (shape.count != 1 || shape.rank > 1) {
    fail("holds " + std::to_string(shape.count) + " values, expected one");
  }
}

void require_list(const AttributeShape& shape, const AttributeFailure& fail) {
  if (shape.rank > 1) fail("has rank " + std::to_string(shape.rank) + ", expected a list");
}

std::string trim_fixed_string(std::string text, H5T_str_t padding) {
  text.resize(::strnlen(text.data(), text.size()));
  if (padding == H5T_STR_SPACEPAD) {
    const std::size_t end = text.find_last_not_of(' ');
    text.resize(end == std::string::npos ? 0 : end + 1);
  }
  return text;
}

std::string read_string_value(hid_t attribute, const AttributeShape& shape, const AttributeFailure& fail) {
  const hid_t type = shape.type.get();
  const htri_t variable = H5Tis_variable_str(type);
  if (variable < 0) fail(kDamaged);
  if (variable > 0) {
    const H5T_cset_t cset = H5Tget_cset(type);
    H5Handle memory_type = copy_type(H5T_C_S1);
    if (cset == H5T_CSET_ERROR || !memory_type || H5Tset_size(memory_type.get(), H5T_VARIABLE) < 0 ||
        H5Tset_cset(memory_type.get(), cset) < 0) {
      fail(kDamaged);
    }
    if (!variable_string_is_intact(attribute, fail.file, fail.file_path)) fail(kDamaged);
    char* text = nullptr;
    if (H5Aread(attribute, memory_type.get(), &text) < 0) fail(kDamaged);
    std::string value = text != nullptr ? text : "";
    if (text != nullptr && H5free_memory(text) < 0) fail("cannot release the string HDF5 allocated");
    return value;
  }
  const std::size_t size = H5Tget_size(type);
  const H5T_str_t padding = H5Tget_strpad(type);
  if (size == 0 || size > kMaxStringBytes || padding == H5T_STR_ERROR) fail(kDamaged);
  H5Handle memory_type = copy_type(type);
  if (!memory_type) fail(kDamaged);
  std::string buffer(size, '\0');
  if (H5Aread(attribute, memory_type.get(), buffer.data()) < 0) fail(kDamaged);
  return trim_fixed_string(std::move(buffer), padding);
}

std::vector<std::int64_t> read_int_values(hid_t attribute, const AttributeShape& shape,
                                          const AttributeFailure& fail) {
  if (shape.cls != H5T_INTEGER) fail_wrong_type(shape, "integer", fail);
  const H5T_sign_t sign = H5Tget_sign(shape.type.get());
  const std::size_t size = H5Tget_size(shape.type.get());
  if (sign == H5T_SGN_ERROR || size == 0) fail(kDamaged);
  std::vector<std::int64_t> values(static_cast<std::size_t>(shape.count));
  if (values.empty()) return values;
  if (sign == H5T_SGN_NONE && size >= 8) {
    // HDF5 would clamp values above INT64_MAX without telling; read unsigned and check.
    std::vector<std::uint64_t> raw(values.size());
    if (H5Aread(attribute, H5T_NATIVE_UINT64, raw.data()) < 0) fail(kDamaged);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail("value " + std::to_string(raw[i]) + " does not fit in int64");
      }
      values[i] = static_cast<std::int64_t>(raw[i]);
    }
    return values;
  }
  if (size > 8) fail("wrong type (" + integer_name(sign, size) + ", expected at most 64 bits)");
  if (H5Aread(attribute, H5T_NATIVE_INT64, values.data()) < 0) fail(kDamaged);
  return values;
}

std::vector<double> read_double_values(hid_t attribute, const AttributeShape& shape,
                                       const AttributeFailure& fail) {
  if (shape.cls == H5T_INTEGER) {
    constexpr std::int64_t kExact = std::int64_t{1} << 53;
    std::vector<double> values;
    for (std::int64_t v : read_int_values(attribute, shape, fail)) {
      if (v > kExact || v < -kExact) fail("integer value " + std::to_string(v) + " is not exact as a double");
      values.push_back(static_cast<double>(v));
    }
    return values;
  }
  if (shape.cls != H5T_FLOAT) fail_wrong_type(shape, "float", fail);
  std::vector<double> values(static_cast<std::size_t>(shape.count));
  if (!values.empty() && H5Aread(attribute, H5T_NATIVE_DOUBLE, values.data()) < 0) fail(kDamaged);
  return values;
}

// An attribute opened and inspected, of a class it may have (`expected` names them for the
// error), with the failure that names it in messages.
struct TypedAttribute {
  H5Handle handle;
  AttributeFailure fail;
  AttributeShape shape;
};

std::optional<TypedAttribute> typed_attribute(H5Handle handle, const std::string& file_path, hid_t file,
                                              const std::string& object_path, const std::string& name,
                                              bool numeric, H5T_class_t cls, const char* expected) {
  if (!handle) return std::nullopt;
  TypedAttribute a{std::move(handle), {file_path, file, object_path + ": attribute '" + name + "'"}, {}};
  a.shape = inspect_attribute(a.handle.get(), a.fail);
  // A float attribute may be stored as integers (numeric): read as doubles, exactness checked.
  const bool accepted = a.shape.cls == cls || (numeric && a.shape.cls == H5T_INTEGER);
  if (!accepted) fail_wrong_type(a.shape, expected, a.fail);
  return a;
}

}  // namespace

std::optional<std::string> H5Reader::string_attribute(const std::string& object_path,
                                                      const std::string& name) const {
  auto a = typed_attribute(open_attribute(object_path, name), path_, file_.get(), object_path, name, false,
                           H5T_STRING, "string");
  if (!a) return std::nullopt;
  require_single_value(a->shape, a->fail);
  return read_string_value(a->handle.get(), a->shape, a->fail);
}

std::optional<std::int64_t> H5Reader::int_attribute(const std::string& object_path,
                                                    const std::string& name) const {
  auto a = typed_attribute(open_attribute(object_path, name), path_, file_.get(), object_path, name, false,
                           H5T_INTEGER, "integer");
  if (!a) return std::nullopt;
  require_single_value(a->shape, a->fail);
  return read_int_values(a->handle.get(), a->shape, a->fail).front();
}

std::optional<double> H5Reader::double_attribute(const std::string& object_path,
                                                 const std::string& name) const {
  auto a = typed_attribute(open_attribute(object_path, name), path_, file_.get(), object_path, name, true,
                           H5T_FLOAT, "float");
  if (!a) return std::nullopt;
  require_single_value(a->shape, a->fail);
  return read_double_values(a->handle.get(), a->shape, a->fail).front();
}

std::optional<std::vector<std::int64_t>> H5Reader::int_list_attribute(const std::string& object_path,
                                                                      const std::string& name) const {
  auto a = typed_attribute(open_attribute(object_path, name), path_, file_.get(), object_path, name, false,
                           H5T_INTEGER, "integer");
  if (!a) return std::nullopt;
  require_list(a->shape, a->fail);
  return read_int_values(a->handle.get(), a->shape, a->fail);
}

std::optional<std::vector<double>> H5Reader::double_list_attribute(const std::string& object_path,
                                                                   const std::string& name) const {
  auto a = typed_attribute(open_attribute(object_path, name), path_, file_.get(), object_path, name, true,
                           H5T_FLOAT, "float");
  if (!a) return std::nullopt;
  require_list(a->shape, a->fail);
  return read_double_values(a->handle.get(), a->shape, a->fail);
}

}  // namespace fc

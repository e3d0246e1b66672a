#pragma once
// The one way the project reads and writes HDF5 files.
//
// Storage schema (what other tools see):
//   fp16    IEEE half-precision float (h5py: numpy float16)
//   bf16    uint16 bit patterns + string attribute dtype="bfloat16"
//   bool    uint8 0/1 + string attribute dtype="bool"
//   f32 f64 i32 i64 u8 u16   the standard little-endian types
// Non-empty datasets of rank >= 1 are chunked (<= 1 MiB a chunk) with shuffle + deflate 4;
// scalars and empty datasets are contiguous. String attributes are variable-length UTF-8.
//
// Files are written in the HDF5 1.8 object formats (checksummed metadata; read by any
// HDF5 >= 1.8, h5py, h5dump) without timestamps, so equal content gives equal bytes.
//
// Object paths are absolute ("/stages/qk/data"); "/" is the root group. Every error is an
// fc::Error whose message is one line starting with the file path and naming the object.
// The reader is meant for damaged files too: every HDF5 failure becomes an fc::Error, and
// what HDF5 1.10 itself does not check (global heap collections behind string attributes,
// absurd dataspace sizes) is checked before HDF5 or the allocator sees it.
#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "harness/io/staged_file.h"

namespace fc {

enum class H5Kind : std::uint8_t {
  file, group, dataset, dataspace, datatype, attribute, property_list,
  object,  // from H5Oopen: a group, dataset or committed datatype
};

// Owns one HDF5 identifier and closes it with the close function of its kind.
// Constructing from a negative id gives an empty handle, so a failed call leaks nothing.
class H5Handle {
 public:
  H5Handle() = default;
  H5Handle(hid_t id, H5Kind kind) : id_(id), kind_(kind) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& other) noexcept;
  H5Handle& operator=(H5Handle&& other) noexcept;
  ~H5Handle() { close(); }

  hid_t get() const { return id_; }
  H5Kind kind() const { return kind_; }
  explicit operator bool() const { return id_ >= 0; }

  // Closes now; returns the close function's status (0 when there was nothing to close).
  herr_t close() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
  H5Kind kind_ = H5Kind::object;
};

// Turns off HDF5's printing of its error stack (once per thread: the stack is per thread
// in thread-safe builds). Our exceptions carry the message.
void silence_hdf5_error_printing();

// Writes a StagedFile (harness/io/staged_file.h): commit() puts it at final_path whole;
// without commit() (an exception, an early return) nothing is left behind.
class H5Writer {
 public:
  explicit H5Writer(std::string final_path);
  ~H5Writer();
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;
  H5Writer(H5Writer&&) = delete;
  H5Writer& operator=(H5Writer&&) = delete;

  // Creates missing parent groups. Writing to an existing path is an error.
  void write_tensor(const std::string& dataset_path, const HostTensor& t);
  // A dataset written in pieces: created whole (zeros until written), then each piece at its
  // offset, `block` holding the piece's extent (rank equal to the dataset's).
  void create_dataset(const std::string& dataset_path, DType dtype, const Dims& dims);
  void write_block(const std::string& dataset_path, const Dims& offset, const HostTensor& block);
  void ensure_group(const std::string& group_path);

  // On an existing group or dataset; an existing attribute of that name is replaced.
  void set_attribute(const std::string& object_path, const std::string& name, const std::string& value);
  void set_attribute(const std::string& object_path, const std::string& name, const char* value);
  void set_attribute(const std::string& object_path, const std::string& name, std::int64_t value);
  void set_attribute(const std::string& object_path, const std::string& name, double value);
  void set_attribute(const std::string& object_path, const std::string& name,
                     const std::vector<std::int64_t>& value);
  void set_attribute(const std::string& object_path, const std::string& name,
                     const std::vector<double>& value);
  // Any other integer (int, size_t, ...) is stored as int64, so set_attribute(p, n, 3) compiles.
  template <class Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool> &&
                                            !std::is_same_v<Int, std::int64_t>, int> = 0>
  void set_attribute(const std::string& object_path, const std::string& name, Int value) {
    set_attribute(object_path, name, static_cast<std::int64_t>(value));
  }

  // Flushes, closes and renames to the final path (replacing an existing file).
  void commit();

  const std::string& path() const { return staged_.path(); }

  // Refuses (fc::Error naming `object`) before anything is written when `bytes` of datasets
  // and some metadata would not fit the file system's free space, counted as require_space
  // counts: a writer that knows its total says so up front, not after hours of writing.
  void require_room(const std::string& object, std::size_t bytes) const { require_space(object, bytes); }

 private:
  [[noreturn]] void fail(const std::string& object, const std::string& what) const;
  // A block's bytes and some metadata must fit the file system's free space and the process's
  // file size limit (ulimit -f): HDF5 corrupts its heap when a write fails for want of room
  // (a segfault at the next close, seen on a full tmpfs and past the limit), so such a write
  // is refused before it starts. Counted uncompressed (what the
  // deflate filter saves is not known in advance) and against the space an unprivileged user
  // may take: it may refuse a write that would have fit, never let one run out.
  void require_space(const std::string& object, std::size_t bytes) const;
  void require_open(const std::string& object) const;
  H5Handle open_object(const std::string& object_path) const;
  // Replaces attribute `name` of the object by one of file_type over `space`, written
  // from `data` in mem_type (nothing written when the space holds no element).
  void put_attribute(const std::string& object_path, const std::string& name, hid_t file_type,
                     hid_t mem_type, hid_t space, const void* data);

  StagedFile staged_;
  H5Handle file_;
};

class H5Reader {
 public:
  explicit H5Reader(std::string path);

  const std::string& path() const { return path_; }

  // True when a group or dataset is at object_path; false when a component is missing, is
  // a dangling link, or is not a group. Throws only on a damaged file or a relative path.
  bool exists(const std::string& object_path) const;

  // Maps the stored type back to a dtype (see the schema above; h5py's bool enum and a
  // bfloat16 float type are accepted too); bool values are normalised to 0/1.
  HostTensor read_tensor(const std::string& dataset_path) const;

  // Names of the links in a group, sorted.
  std::vector<std::string> children(const std::string& group_path) const;

  // nullopt when the object has no such attribute; fc::Error when it has one of another
  // type or shape, or when the object itself is missing. Integer attributes are accepted
  // by the double readers (converted exactly for |v| <= 2^53).
  std::optional<std::string> string_attribute(const std::string& object_path, const std::string& name) const;
  std::optional<std::int64_t> int_attribute(const std::string& object_path, const std::string& name) const;
  std::optional<double> double_attribute(const std::string& object_path, const std::string& name) const;
  std::optional<std::vector<std::int64_t>> int_list_attribute(const std::string& object_path,
                                                              const std::string& name) const;
  std::optional<std::vector<double>> double_list_attribute(const std::string& object_path,
                                                           const std::string& name) const;

 private:
  [[noreturn]] void fail(const std::string& object, const std::string& what) const;
  H5Handle find(const std::string& object_path) const;  // empty when missing
  H5Handle open_object(const std::string& object_path, const char* missing_what) const;
  H5Handle open_attribute(const std::string& object_path, const std::string& name) const;

  std::string path_;
  H5Handle file_;
};

}  // namespace fc

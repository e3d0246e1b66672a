#pragma once
// ZIP archives, independent of what they hold, through libzip. Reading: the entries of one
// archive and the bytes of each, stored or deflate, ZIP64 included, with libzip's
// consistency checks (every local header against the central directory) and our limits on
// top: every problem is an fc::Error "PATH: what" (for an entry, "PATH: NAME: what").
// Writing: an archive of stored entries, ZIP64 where sizes or offsets need it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fc {

// One entry of the central directory.
struct ZipEntry {
  std::uint64_t index = 0;  // in the central directory
  std::string name;
  std::string origin;  // "PATH: NAME", the prefix of every message about this entry
  bool deflated = false;
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
};

// An uninitialised byte buffer: pages are touched only as data arrives, so a file that
// lies about a large size costs memory only for the bytes it really delivers.
class ByteBuffer {
 public:
  ByteBuffer(const std::string& origin, std::uint64_t size);  // "ORIGIN: cannot allocate ..."
  std::uint8_t* data() { return data_.get(); }
  const std::uint8_t* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<std::uint8_t[]> data_;
  std::size_t size_;
};

// Looks at the start of a deflated entry before the reader allocates its recorded size:
// unlike a stored entry's, that size is not bounded by the file's. `check` gets the first
// min(size, prefix_size) bytes, or fewer where the data ends early, and throws to refuse.
struct ZipPrefixCheck {
  std::size_t prefix_size = 0;
  std::function<void(const std::uint8_t* prefix, std::size_t size)> check;
};

class ZipReader {
 public:
  // Opens PATH. `kind` names the archive expected in messages ("not a .npz archive").
  explicit ZipReader(const std::string& path, std::string kind = "ZIP archive");
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  // Every entry, in central directory order.
  std::vector<ZipEntry> entries() const;

  // The bytes of one entry from entries(), uncompressed and CRC-checked.
  ByteBuffer read(const ZipEntry& entry, const ZipPrefixCheck& prefix_check = {}) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ZIP stores name lengths in 16 bits.
constexpr std::size_t kMaxZipNameLength = 0xffff;

// Bytes of an entry that the writer takes from the caller's memory without copying: they
// must stay valid until finish() returns.
struct ByteSpan {
  const void* data = nullptr;
  std::size_t size = 0;
};

// Writes to "PATH.tmp-PID-N" and renames onto PATH in finish(); a writer destroyed before
// that removes the temporary file, so a failed write never leaves a half archive at PATH.
class ZipWriter {
 public:
  explicit ZipWriter(const std::string& path);
  ~ZipWriter();
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  // Appends a stored entry whose bytes are the parts, one after another.
  void add(const std::string& name, const std::vector<ByteSpan>& parts);
  // Writes the archive and puts it at PATH.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fc

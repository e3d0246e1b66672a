#include "harness/io/zip_archive.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <utility>

#include "core/error.h"
#include "harness/io/staged_file.h"
#include "harness/io/little_endian.h"
#include "harness/io/printable.h"

namespace fc {
namespace {

constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{64} << 30;  // 64 GiB per entry

constexpr std::uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr std::uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::uint16_t kZip64ExtraId = 0x0001;

constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::size_t kMaxCommentLength = 0xffff;

constexpr std::uint16_t kMax16 = 0xffff;
constexpr std::uint32_t kMax32 = 0xffffffff;

constexpr std::uint16_t kMethodStored = 0;
constexpr std::uint16_t kMethodDeflate = 8;
constexpr std::uint16_t kFlagEncrypted = 0x0001;
constexpr std::uint16_t kFlagStrongEncryption = 0x0040;
constexpr std::uint16_t kFlagUtf8Name = 0x0800;
constexpr std::uint16_t kDosDate1980 = (1 << 5) | 1;  // 1980-01-01, for reproducible archives

constexpr std::size_t kIoChunk = std::size_t{1} << 20;

std::uint32_t crc32_of(const std::uint8_t* data, std::size_t size, std::uint32_t crc = 0) {
  uLong value = crc;
  while (size > 0) {
    const std::size_t n = std::min<std::size_t>(size, kIoChunk * 1024);
    value = crc32(value, data, static_cast<uInt>(n));
    data += n;
    size -= n;
  }
  return static_cast<std::uint32_t>(value);
}

struct CloseFile {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FileHandle = std::unique_ptr<std::FILE, CloseFile>;

class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw file_error(path, "is a directory");
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) throw file_error(path, std::string("cannot open: ") + std::strerror(errno));
    if (fseeko(file_.get(), 0, SEEK_END) != 0) fail("cannot seek");
    const off_t end = ftello(file_.get());
    if (end < 0) fail("cannot tell the file size");
    size_ = static_cast<std::uint64_t>(end);
  }

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  void read_at(std::uint64_t offset, std::uint8_t* out, std::size_t n,
               const std::string& what) const {
    if (offset > size_ || n > size_ - offset) {
      throw file_error(path_, what + " reaches past the end of the file");
    }
    if (n == 0) return;
    if (fseeko(file_.get(), static_cast<off_t>(offset), SEEK_SET) != 0) fail("cannot seek");
    if (std::fread(out, 1, n, file_.get()) != n) fail("read error");
  }
  std::vector<std::uint8_t> read_at(std::uint64_t offset, std::size_t n,
                                    const std::string& what) const {
    if (offset > size_ || n > size_ - offset) {
      throw file_error(path_, what + " reaches past the end of the file");
    }
    std::vector<std::uint8_t> bytes(n);
    read_at(offset, bytes.data(), n, what);
    return bytes;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    const int err = errno;
    throw file_error(path_,
                     std::string(what) + (err ? std::string(": ") + std::strerror(err) : ""));
  }

  std::string path_;
  FileHandle file_;
  std::uint64_t size_ = 0;
};

// Writes a StagedFile: nothing at PATH until commit(), nothing left behind without it.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path) : staged_(path) {
    file_.reset(std::fopen(staged_.temp_path().c_str(), "wb"));
    if (!file_) throw file_error(path, std::string("cannot create: ") + std::strerror(errno));
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::string& path() const { return staged_.path(); }
  std::uint64_t position() const { return position_; }

  void write(const void* data, std::size_t n) {
    if (n > 0 && std::fwrite(data, 1, n, file_.get()) != n) fail("write error");
    position_ += n;
  }
  void write(const std::vector<std::uint8_t>& bytes) { write(bytes.data(), bytes.size()); }

  void commit() {
    if (std::fclose(file_.release()) != 0) fail("write error");
    staged_.commit();
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw file_error(path(), std::string(what) + ": " + std::strerror(errno));
  }

  StagedFile staged_;
  FileHandle file_;  // closed before staged_ removes an uncommitted file
  std::uint64_t position_ = 0;
};

struct CentralDirectory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

struct EndRecord {
  std::uint64_t position = 0;
  std::uint16_t disk = 0, directory_disk = 0;
  std::uint16_t entries_on_disk = 0, entries = 0;
  std::uint32_t directory_size = 0, directory_offset = 0;
};

// The end record is the last 22 bytes plus a comment of up to 64 KiB. Search backwards for
// a signature whose comment length ends exactly at the end of the file.
EndRecord find_end_record(const InputFile& file, const std::string& kind) {
  if (file.size() == 0) throw file_error(file.path(), "empty file, not a " + kind);
  if (file.size() < kEndSize)
    throw file_error(file.path(), "not a " + kind + " (too short for a ZIP file)");
  const std::size_t tail_size =
      static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), kEndSize + kMaxCommentLength));
  const std::uint64_t tail_start = file.size() - tail_size;
  const std::vector<std::uint8_t> tail = file.read_at(tail_start, tail_size, "end record");
  for (std::size_t pos = tail_size - kEndSize + 1; pos-- > 0;) {
    const std::uint8_t* p = tail.data() + pos;
    if (load_le(p, 4) != kEndSignature || pos + kEndSize + load_le(p + 20, 2) != tail_size)
      continue;
    ByteCursor cursor(file.path(), "end record", p + 4, kEndSize - 4);
    EndRecord end;
    end.position = tail_start + pos;
    end.disk = cursor.u16();
    end.directory_disk = cursor.u16();
    end.entries_on_disk = cursor.u16();
    end.entries = cursor.u16();
    end.directory_size = cursor.u32();
    end.directory_offset = cursor.u32();
    return end;
  }
  throw file_error(file.path(), "not a " + kind + " (no ZIP end of central directory record)");
}

// Where the central directory is, from the end record or its ZIP64 version.
CentralDirectory locate_central_directory(const InputFile& file, const std::string& kind) {
  const std::string& path = file.path();
  const EndRecord end = find_end_record(file, kind);
  CentralDirectory directory{end.entries, end.directory_offset, end.directory_size};
  std::uint64_t directory_end = end.position;  // the central directory must end where this starts
  std::uint64_t disk = end.disk, directory_disk = end.directory_disk,
                entries_on_disk = end.entries_on_disk;

  bool zip64 = false;
  if (end.position >= kZip64LocatorSize) {
    const std::uint64_t locator_position = end.position - kZip64LocatorSize;
    const auto locator = file.read_at(locator_position, kZip64LocatorSize, "ZIP64 locator");
    if (load_le(locator.data(), 4) == kZip64LocatorSignature) {
      zip64 = true;
      ByteCursor l(path, "ZIP64 locator", locator.data() + 4, kZip64LocatorSize - 4);
      const std::uint32_t record_disk = l.u32();
      const std::uint64_t record_offset = l.u64();
      const std::uint32_t disks = l.u32();
      if (record_disk != 0 || disks > 1)
        throw file_error(path, "multi-disk ZIP archives are not supported");
      if (record_offset > locator_position || locator_position - record_offset < kZip64EndSize) {
        throw file_error(path, "bad ZIP64 end record offset");
      }
      const auto record = file.read_at(record_offset, kZip64EndSize, "ZIP64 end record");
      ByteCursor r(path, "ZIP64 end record", record.data(), record.size());
      if (r.u32() != kZip64EndSignature) throw file_error(path, "bad ZIP64 end record signature");
      r.skip(8 + 2 + 2);  // record size, versions
      disk = r.u32();
      directory_disk = r.u32();
      entries_on_disk = r.u64();
      directory.entries = r.u64();
      directory.size = r.u64();
      directory.offset = r.u64();
      directory_end = record_offset;
    }
  }
  if (!zip64 &&
      (end.entries == kMax16 || end.directory_size == kMax32 || end.directory_offset == kMax32)) {
    throw file_error(path, "ZIP64 end record missing");
  }
  if (disk != 0 || directory_disk != 0 || entries_on_disk != directory.entries) {
    throw file_error(path, "multi-disk ZIP archives are not supported");
  }
  if (directory.offset > directory_end || directory.size != directory_end - directory.offset) {
    throw file_error(path, "central directory offset/size do not match the end record position");
  }
  if (directory.entries > directory.size / kCentralHeaderSize) {
    throw file_error(
        path, "central directory too small for " + std::to_string(directory.entries) + " entries");
  }
  return directory;
}

// The 0x0001 extra field holds, in this order, whichever of the 32-bit fields are 0xffffffff.
void apply_zip64_extra(const std::string& origin, const std::uint8_t* extra, std::size_t length,
                       ZipEntry& entry, std::uint32_t disk_start_field) {
  bool need_size = entry.size == kMax32, need_compressed = entry.compressed_size == kMax32;
  bool need_offset = entry.local_header_offset == kMax32;
  ByteCursor fields(origin, "extra fields", extra, length);
  while (fields.remaining() >= 4) {
    const std::uint16_t id = fields.u16();
    const std::uint16_t size = fields.u16();
    const std::uint8_t* data = fields.take(size);
    if (id != kZip64ExtraId) continue;
    ByteCursor z(origin, "ZIP64 extra field", data, size);
    if (need_size) entry.size = z.u64();
    if (need_compressed) entry.compressed_size = z.u64();
    if (need_offset) entry.local_header_offset = z.u64();
    if (disk_start_field == kMax16) disk_start_field = z.u32();
    need_size = need_compressed = need_offset = false;
  }
  if (need_size || need_compressed || need_offset)
    throw file_error(origin, "ZIP64 extra field missing");
  if (disk_start_field != 0) throw file_error(origin, "multi-disk ZIP archives are not supported");
}

ZipEntry parse_central_entry(const std::string& path, ByteCursor& cursor) {
  if (cursor.u32() != kCentralHeaderSignature)
    throw file_error(path, "bad central directory entry signature");
  ZipEntry entry;
  cursor.skip(4);  // versions made by / needed
  entry.flags = cursor.u16();
  entry.method = cursor.u16();
  cursor.skip(4);  // time, date
  entry.crc = cursor.u32();
  entry.compressed_size = cursor.u32();
  entry.size = cursor.u32();
  const std::uint16_t name_length = cursor.u16();
  const std::uint16_t extra_length = cursor.u16();
  const std::uint16_t comment_length = cursor.u16();
  const std::uint16_t disk_start = cursor.u16();
  cursor.skip(2 + 4);  // internal, external attributes
  entry.local_header_offset = cursor.u32();
  entry.name = cursor.text(name_length);
  const std::uint8_t* extra = cursor.take(extra_length);
  cursor.skip(comment_length);

  entry.origin = path + ": " + printable(entry.name);
  const std::string& origin = entry.origin;
  if (entry.name.empty()) throw file_error(path, "ZIP entry with an empty name");
  apply_zip64_extra(origin, extra, extra_length, entry, disk_start);
  if (entry.flags & (kFlagEncrypted | kFlagStrongEncryption)) {
    throw file_error(origin, "encrypted ZIP entries are not supported");
  }
  if (entry.method != kMethodStored && entry.method != kMethodDeflate) {
    throw file_error(origin, "unsupported ZIP compression method " + std::to_string(entry.method) +
                                 " (only stored and deflate)");
  }
  if (entry.size > kMaxEntryBytes) {
    throw file_error(origin,
                     "size " + std::to_string(entry.size) + " bytes is over the 64 GiB limit");
  }
  if (entry.method == kMethodStored && entry.compressed_size != entry.size) {
    throw file_error(origin, "stored entry with different compressed and uncompressed sizes");
  }
  return entry;
}

// The local header repeats the name; its size fields may be zero (data descriptor) or
// placeholders, so only its name and extra lengths are used, to find the data.
void locate_entry_data(const InputFile& file, const CentralDirectory& directory, ZipEntry& entry) {
  const std::string& origin = entry.origin;
  if (entry.local_header_offset > directory.offset ||
      directory.offset - entry.local_header_offset < kLocalHeaderSize) {
    throw file_error(origin, "local header offset is outside the archive data");
  }
  const auto fixed =
      file.read_at(entry.local_header_offset, kLocalHeaderSize, origin + ": local header");
  ByteCursor header(origin, "local header", fixed.data(), fixed.size());
  if (header.u32() != kLocalHeaderSignature) throw file_error(origin, "bad local header signature");
  header.skip(2);  // version needed
  const std::uint16_t flags = header.u16();
  const std::uint16_t method = header.u16();
  header.skip(4 + 4 + 4 + 4);  // time, date, crc, sizes
  const std::uint16_t name_length = header.u16();
  const std::uint16_t extra_length = header.u16();
  if (method != entry.method || (flags & kFlagEncrypted) != (entry.flags & kFlagEncrypted)) {
    throw file_error(origin, "local header does not match the central directory");
  }
  const std::uint64_t name_offset = entry.local_header_offset + kLocalHeaderSize;
  const auto name = file.read_at(name_offset, name_length, origin + ": local header name");
  if (std::string(name.begin(), name.end()) != entry.name) {
    throw file_error(origin, "local header name does not match the central directory");
  }
  entry.data_offset = name_offset + name_length + extra_length;
  if (entry.data_offset > directory.offset ||
      entry.compressed_size > directory.offset - entry.data_offset) {
    throw file_error(origin, "data runs into the central directory or past the end of the file");
  }
}

void check_entries_disjoint(const std::string& path, std::vector<const ZipEntry*> entries) {
  std::sort(entries.begin(), entries.end(), [](const ZipEntry* a, const ZipEntry* b) {
    return a->local_header_offset < b->local_header_offset;
  });
  for (std::size_t i = 1; i < entries.size(); ++i) {
    const ZipEntry& before = *entries[i - 1];
    if (before.data_offset + before.compressed_size > entries[i]->local_header_offset) {
      throw file_error(path, "ZIP entries '" + printable(before.name) + "' and '" +
                                 printable(entries[i]->name) + "' overlap");
    }
  }
}

// A raw deflate stream (no zlib header, as in ZIP) read from one entry of the file.
class Inflater {
 public:
  Inflater(const InputFile& file, const ZipEntry& entry)
      : file_(file),
        origin_(entry.origin),
        buffer_(static_cast<std::size_t>(std::min<std::uint64_t>(entry.compressed_size, kIoChunk))),
        next_offset_(entry.data_offset),
        input_left_(entry.compressed_size) {
    if (inflateInit2(&stream_, -MAX_WBITS) != Z_OK)
      throw file_error(origin_, "cannot initialise zlib");
  }
  ~Inflater() { inflateEnd(&stream_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Inflates up to n bytes into out, reading compressed bytes from the file as needed.
  // Returns how many bytes it produced: n, or fewer if the deflate stream ended.
  std::size_t inflate_into(std::uint8_t* out, std::size_t n) {
    std::size_t produced = 0;
    while (produced < n && !finished_) {
      refill();
      const std::size_t room = std::min<std::size_t>(n - produced, UINT_MAX);
      stream_.next_out = out + produced;
      stream_.avail_out = static_cast<uInt>(room);
      const int status = inflate(&stream_, Z_NO_FLUSH);
      produced += room - stream_.avail_out;
      check(status);
    }
    return produced;
  }

  // After the recorded size has been produced, the stream must end without more output.
  void expect_end() {
    while (!finished_) {
      std::uint8_t extra = 0;
      if (inflate_into(&extra, 1) != 0)
        throw file_error(origin_, "data is longer than its recorded size");
    }
  }

 private:
  void refill() {
    if (stream_.avail_in != 0 || input_left_ == 0) return;
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(input_left_, buffer_.size()));
    file_.read_at(next_offset_, buffer_.data(), n, origin_ + ": compressed data");
    next_offset_ += n;
    input_left_ -= n;
    stream_.next_in = buffer_.data();
    stream_.avail_in = static_cast<uInt>(n);
  }

  void check(int status) {
    switch (status) {
      case Z_OK:
        return;
      case Z_STREAM_END:
        finished_ = true;
        return;
      case Z_BUF_ERROR:
        if (stream_.avail_in == 0 && input_left_ == 0)
          throw file_error(origin_, "compressed data is truncated");
        return;
      case Z_MEM_ERROR:
        throw file_error(origin_, "out of memory while decompressing");
      default:
        throw file_error(origin_,
                         std::string("invalid deflate data") +
                             (stream_.msg ? std::string(": ") + printable(stream_.msg) : ""));
    }
  }

  const InputFile& file_;
  std::string origin_;
  z_stream stream_{};
  std::vector<std::uint8_t> buffer_;
  std::uint64_t next_offset_ = 0;
  std::uint64_t input_left_ = 0;
  bool finished_ = false;
};

// Decompress in two steps: the prefix first, for the caller to check against the recorded
// size before allocating for the whole entry.
ByteBuffer inflate_entry(const InputFile& file, const ZipEntry& entry,
                         const ZipPrefixCheck& prefix_check) {
  Inflater inflater(file, entry);
  const std::string& origin = entry.origin;
  const std::size_t size = static_cast<std::size_t>(entry.size);
  const std::size_t probe_size = std::min<std::size_t>(size, prefix_check.prefix_size);
  std::vector<std::uint8_t> probe(probe_size);
  const std::size_t probed = inflater.inflate_into(probe.data(), probe_size);
  if (prefix_check.check) prefix_check.check(probe.data(), probed);
  if (probed < probe_size) throw file_error(origin, "data is shorter than its recorded size");
  ByteBuffer image(origin, entry.size);
  if (probe_size > 0) std::memcpy(image.data(), probe.data(), probe_size);
  const std::size_t rest = size - probe_size;
  if (inflater.inflate_into(image.data() + probe_size, rest) < rest) {
    throw file_error(origin, "data is shorter than its recorded size");
  }
  inflater.expect_end();
  return image;
}

bool needs_utf8_flag(const std::string& name) {
  return std::any_of(name.begin(), name.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
}

struct WrittenEntry {
  std::string name;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
};

std::vector<std::uint8_t> local_header(const WrittenEntry& entry) {
  const bool zip64 = entry.size >= kMax32;
  std::vector<std::uint8_t> out;
  put32(out, kLocalHeaderSignature);
  put16(out, zip64 ? 45 : 20);
  put16(out, needs_utf8_flag(entry.name) ? kFlagUtf8Name : 0);
  put16(out, kMethodStored);
  put16(out, 0);  // time 00:00:00
  put16(out, kDosDate1980);
  put32(out, entry.crc);
  put32(out, zip64 ? kMax32 : entry.size);
  put32(out, zip64 ? kMax32 : entry.size);
  put16(out, entry.name.size());
  put16(out, zip64 ? 20 : 0);
  out.insert(out.end(), entry.name.begin(), entry.name.end());
  if (zip64) {
    put16(out, kZip64ExtraId);
    put16(out, 16);
    put64(out, entry.size);
    put64(out, entry.size);
  }
  return out;
}

std::vector<std::uint8_t> central_entry(const WrittenEntry& entry) {
  const bool big_size = entry.size >= kMax32;
  const bool big_offset = entry.offset >= kMax32;
  std::vector<std::uint8_t> extra;
  if (big_size || big_offset) {
    put16(extra, kZip64ExtraId);
    put16(extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0));
    if (big_size) {
      put64(extra, entry.size);
      put64(extra, entry.size);
    }
    if (big_offset) put64(extra, entry.offset);
  }
  const std::uint16_t version = extra.empty() ? 20 : 45;
  std::vector<std::uint8_t> out;
  put32(out, kCentralHeaderSignature);
  put16(out, version);
  put16(out, version);
  put16(out, needs_utf8_flag(entry.name) ? kFlagUtf8Name : 0);
  put16(out, kMethodStored);
  put16(out, 0);  // time 00:00:00
  put16(out, kDosDate1980);
  put32(out, entry.crc);
  put32(out, big_size ? kMax32 : entry.size);
  put32(out, big_size ? kMax32 : entry.size);
  put16(out, entry.name.size());
  put16(out, extra.size());
  put16(out, 0);  // comment
  put16(out, 0);  // disk
  put16(out, 0);  // internal attributes
  put32(out, 0);  // external attributes
  put32(out, big_offset ? kMax32 : entry.offset);
  out.insert(out.end(), entry.name.begin(), entry.name.end());
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::vector<std::uint8_t> end_records(std::uint64_t entries, std::uint64_t directory_offset,
                                      std::uint64_t directory_size) {
  std::vector<std::uint8_t> out;
  const bool zip64 = entries >= kMax16 || directory_offset >= kMax32 || directory_size >= kMax32;
  if (zip64) {
    const std::uint64_t record_offset = directory_offset + directory_size;
    put32(out, kZip64EndSignature);
    put64(out, kZip64EndSize - 12);
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, entries);
    put64(out, entries);
    put64(out, directory_size);
    put64(out, directory_offset);
    put32(out, kZip64LocatorSignature);
    put32(out, 0);
    put64(out, record_offset);
    put32(out, 1);
  }
  put32(out, kEndSignature);
  put16(out, 0);
  put16(out, 0);
  put16(out, zip64 ? kMax16 : entries);
  put16(out, zip64 ? kMax16 : entries);
  put32(out, zip64 ? kMax32 : directory_size);
  put32(out, zip64 ? kMax32 : directory_offset);
  put16(out, 0);  // comment
  return out;
}

}  // namespace

ByteBuffer::ByteBuffer(const std::string& origin, std::uint64_t size)
    : size_(static_cast<std::size_t>(size)) {
  try {
    data_.reset(new std::uint8_t[size_ ? size_ : 1]);
  } catch (const std::bad_alloc&) {
    throw file_error(origin, "cannot allocate " + std::to_string(size) + " bytes");
  }
}

struct ZipReader::State {
  State(const std::string& path, std::string kind) : file(path), kind(std::move(kind)) {}
  InputFile file;
  std::string kind;
};

ZipReader::ZipReader(const std::string& path, std::string kind)
    : state_(std::make_unique<State>(path, std::move(kind))) {}

ZipReader::~ZipReader() = default;

std::vector<ZipEntry> ZipReader::entries() const {
  const InputFile& file = state_->file;
  const CentralDirectory directory = locate_central_directory(file, state_->kind);
  const auto bytes =
      file.read_at(directory.offset, static_cast<std::size_t>(directory.size), "central directory");
  ByteCursor cursor(file.path(), "central directory", bytes.data(), bytes.size());
  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<std::size_t>(directory.entries));
  for (std::uint64_t i = 0; i < directory.entries; ++i)
    entries.push_back(parse_central_entry(file.path(), cursor));
  if (cursor.remaining() != 0) {
    throw file_error(file.path(), std::to_string(cursor.remaining()) +
                                      " unexpected bytes in the central directory");
  }
  std::vector<const ZipEntry*> order;
  for (ZipEntry& entry : entries) {
    locate_entry_data(file, directory, entry);
    order.push_back(&entry);
  }
  check_entries_disjoint(file.path(), std::move(order));
  return entries;
}

ByteBuffer ZipReader::read(const ZipEntry& entry, const ZipPrefixCheck& prefix_check) const {
  ByteBuffer image = [&] {
    if (entry.method == kMethodDeflate) return inflate_entry(state_->file, entry, prefix_check);
    ByteBuffer stored(entry.origin, entry.size);
    state_->file.read_at(entry.data_offset, stored.data(), stored.size(), entry.origin + ": data");
    return stored;
  }();
  if (crc32_of(image.data(), image.size()) != entry.crc)
    throw file_error(entry.origin, "CRC-32 mismatch, data is damaged");
  return image;
}

struct ZipWriter::State {
  explicit State(const std::string& path) : out(path) {}
  OutputFile out;
  std::vector<WrittenEntry> written;
};

ZipWriter::ZipWriter(const std::string& path) : state_(std::make_unique<State>(path)) {}

ZipWriter::~ZipWriter() = default;

void ZipWriter::add(const std::string& name, const std::vector<ByteSpan>& parts) {
  OutputFile& out = state_->out;
  if (name.size() > kMaxZipNameLength) {
    throw file_error(out.path(), "ZIP entry name '" + printable(name) + "' is too long");
  }
  WrittenEntry entry;
  entry.name = name;
  for (const ByteSpan& part : parts) {
    entry.size += part.size;
    entry.crc = crc32_of(static_cast<const std::uint8_t*>(part.data), part.size, entry.crc);
  }
  entry.offset = out.position();
  out.write(local_header(entry));
  for (const ByteSpan& part : parts) out.write(part.data, part.size);
  state_->written.push_back(std::move(entry));
}

void ZipWriter::finish() {
  OutputFile& out = state_->out;
  const std::uint64_t directory_offset = out.position();
  for (const WrittenEntry& entry : state_->written) out.write(central_entry(entry));
  const std::uint64_t directory_size = out.position() - directory_offset;
  out.write(end_records(state_->written.size(), directory_offset, directory_size));
  out.commit();
}

}  // namespace fc

#include "harness/io/zip_archive.h"

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <new>
#include <utility>

#include "core/error.h"
#include "harness/io/printable.h"
#include "harness/io/staged_file.h"

namespace fc {
namespace {

constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{64} << 30;  // 64 GiB per entry
constexpr std::uint64_t kReadChunk = std::uint64_t{1} << 30;        // one zip_fread at most

struct DiscardArchive {
  void operator()(zip_t* archive) const { zip_discard(archive); }
};
using ArchiveHandle = std::unique_ptr<zip_t, DiscardArchive>;

struct CloseEntry {
  void operator()(zip_file_t* file) const { zip_fclose(file); }
};
using EntryHandle = std::unique_ptr<zip_file_t, CloseEntry>;

// libzip's sentence for an error code ("Not a zip archive"), with the OS's reason where
// the code carries one.
std::string libzip_text(const zip_error_t* error) {
  zip_error_t copy;
  zip_error_init(&copy);
  zip_error_set(&copy, zip_error_code_zip(error), zip_error_code_system(error));
  std::string text = zip_error_strerror(&copy);
  zip_error_fini(&copy);
  return text;
}

std::string libzip_text(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = libzip_text(&error);
  zip_error_fini(&error);
  return text;
}

// What an error found while opening the archive means for the file.
[[noreturn]] void fail_open(const std::string& path, const std::string& kind, int code) {
  const std::string why = " (libzip: " + libzip_text(code) + ")";
  switch (code) {
    case ZIP_ER_NOZIP: throw file_error(path, "not a " + kind + why);
    case ZIP_ER_OPEN:
    case ZIP_ER_READ:
    case ZIP_ER_SEEK:
    case ZIP_ER_TELL: throw file_error(path, "cannot open" + why);
    case ZIP_ER_MEMORY: throw file_error(path, "out of memory");
    case ZIP_ER_MULTIDISK: throw file_error(path, "multi-disk ZIP archives are not supported");
    case ZIP_ER_EXISTS: throw file_error(path, "damaged " + kind + ": two entries have the same name");
    default: throw file_error(path, "damaged " + kind + why);
  }
}

// What an error found while reading an entry's data means.
[[noreturn]] void fail_read(const std::string& origin, const zip_error_t* error) {
  const int code = zip_error_code_zip(error);
  if (code == ZIP_ER_CRC) throw file_error(origin, "CRC-32 mismatch, data is damaged");
  if (code == ZIP_ER_MEMORY) throw file_error(origin, "out of memory while decompressing");
  const std::string why = " (libzip: " + libzip_text(error) + ")";
  if (code == ZIP_ER_ZLIB || code == ZIP_ER_COMPRESSED_DATA) throw file_error(origin, "invalid deflate data" + why);
  if (code == ZIP_ER_EOF || code == ZIP_ER_INCONS) {
    throw file_error(origin, "data does not match its recorded size or ends early" + why);
  }
  throw file_error(origin, "cannot read" + why);
}

// Reads up to n bytes of an open entry; fewer only where its data ends.
std::size_t read_up_to(zip_file_t* file, const std::string& origin, std::uint8_t* out, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const zip_int64_t got = zip_fread(file, out + done, std::min<std::uint64_t>(n - done, kReadChunk));
    if (got < 0) fail_read(origin, zip_file_get_error(file));
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

// The checks libzip leaves to its caller: what we decompress, and how much.
void check_entry(const ZipEntry& entry, const zip_stat_t& st) {
  const std::string& origin = entry.origin;
  if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
    throw file_error(origin, "encrypted ZIP entries are not supported");
  }
  if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE) {
    // NumPy writes only these two; refusing the rest keeps other decompressors out of reach of a damaged file.
    throw file_error(origin, "unsupported ZIP compression method " + std::to_string(st.comp_method) +
                                 " (only stored and deflate)");
  }
  if (entry.size > kMaxEntryBytes) {
    throw file_error(origin, "size " + std::to_string(entry.size) + " bytes is over the 64 GiB limit");
  }
  if (!entry.deflated && entry.compressed_size != entry.size) {
    throw file_error(origin, "stored entry with different compressed and uncompressed sizes");
  }
}

// 1980-01-01 00:00 local time, the first DOS date: every entry gets it, so that the same
// arrays always make the same archive.
std::time_t dos_epoch() {
  std::tm tm{};
  tm.tm_year = 80;
  tm.tm_mday = 1;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

// The whole of an archive with no entry: its end of central directory record. libzip
// removes the file instead of writing one.
void write_empty_archive(const std::string& path, const std::string& temp_path) {
  static const unsigned char end_record[22] = {'P', 'K', 5, 6};
  std::FILE* out = std::fopen(temp_path.c_str(), "wb");
  const bool ok = out && std::fwrite(end_record, 1, sizeof end_record, out) == sizeof end_record;
  const int error = errno;
  if (out && std::fclose(out) != 0) throw file_error(path, std::string("cannot write: ") + std::strerror(errno));
  if (!ok) throw file_error(path, std::string("cannot write: ") + std::strerror(error));
}

}  // namespace

ByteBuffer::ByteBuffer(const std::string& origin, std::uint64_t size) : size_(static_cast<std::size_t>(size)) {
  try {
    data_.reset(new std::uint8_t[size_ ? size_ : 1]);
  } catch (const std::bad_alloc&) {
    throw file_error(origin, "cannot allocate " + std::to_string(size) + " bytes");
  }
}

struct ZipReader::State {
  std::string path, kind;
  std::uint64_t file_size = 0;
  ArchiveHandle archive;
};

ZipReader::ZipReader(const std::string& path, std::string kind) : state_(std::make_unique<State>()) {
  state_->path = path;
  state_->kind = std::move(kind);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw file_error(path, "is a directory");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw file_error(path, "cannot open: " + ec.message());
  // libzip reads an empty file as an archive without entries; NumPy never writes one.
  if (size == 0) throw file_error(path, "empty file, not a " + state_->kind);
  state_->file_size = size;
  int code = 0;
  state_->archive.reset(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
  if (!state_->archive) fail_open(path, state_->kind, code);
  note_input_file(path);
}

ZipReader::~ZipReader() = default;

std::vector<ZipEntry> ZipReader::entries() const {
  zip_t* archive = state_->archive.get();
  const zip_int64_t count = zip_get_num_entries(archive, 0);
  if (count < 0) fail_open(state_->path, state_->kind, ZIP_ER_INTERNAL);
  std::vector<ZipEntry> entries;
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(archive, static_cast<zip_uint64_t>(i), 0, &st) != 0) {
      throw file_error(state_->path, "entry " + std::to_string(i) + ": " + libzip_text(zip_get_error(archive)));
    }
    constexpr zip_uint64_t kNeeded = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if ((st.valid & kNeeded) != kNeeded) throw file_error(state_->path, "entry " + std::to_string(i) + " is incomplete");
    ZipEntry entry;
    entry.index = static_cast<std::uint64_t>(i);
    entry.name = st.name;
    entry.origin = state_->path + ": " + printable(entry.name);
    if (entry.name.empty()) throw file_error(state_->path, "ZIP entry with an empty name");
    entry.deflated = st.comp_method == ZIP_CM_DEFLATE;
    entry.compressed_size = st.comp_size;
    entry.size = st.size;
    check_entry(entry, st);
    if (!entry.deflated && entry.size > state_->file_size) {
      throw file_error(entry.origin, "data runs past the end of the file");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

ByteBuffer ZipReader::read(const ZipEntry& entry, const ZipPrefixCheck& prefix_check) const {
  const std::string& origin = entry.origin;
  EntryHandle file(zip_fopen_index(state_->archive.get(), entry.index, 0));
  if (!file) fail_read(origin, zip_get_error(state_->archive.get()));
  const std::size_t size = static_cast<std::size_t>(entry.size);

  // A deflated entry in two steps: the prefix first, for the caller to check against the
  // recorded size before allocating for the whole entry.
  const std::size_t probe_size = entry.deflated ? std::min(size, prefix_check.prefix_size) : 0;
  std::vector<std::uint8_t> probe(probe_size);
  const std::size_t probed = read_up_to(file.get(), origin, probe.data(), probe_size);
  if (entry.deflated && prefix_check.check) prefix_check.check(probe.data(), probed);
  if (probed < probe_size) throw file_error(origin, "data is shorter than its recorded size");

  ByteBuffer image(origin, entry.size);
  if (probe_size > 0) std::memcpy(image.data(), probe.data(), probe_size);
  const std::size_t rest = size - probe_size;
  if (read_up_to(file.get(), origin, image.data() + probe_size, rest) < rest) {
    throw file_error(origin, "data is shorter than its recorded size");
  }
  // Reading on to the end is what makes libzip compare the CRC and the size.
  std::uint8_t extra = 0;
  if (read_up_to(file.get(), origin, &extra, 1) != 0) throw file_error(origin, "data is longer than its recorded size");
  return image;
}

struct ZipWriter::State {
  explicit State(const std::string& path) : staged(path) {}
  StagedFile staged;
  ArchiveHandle archive;
  std::size_t entries = 0;
};

ZipWriter::ZipWriter(const std::string& path) : state_(std::make_unique<State>(path)) {
  int code = 0;
  state_->archive.reset(zip_open(state_->staged.temp_path().c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  if (!state_->archive) throw file_error(path, "cannot write (libzip: " + libzip_text(code) + ")");
}

ZipWriter::~ZipWriter() = default;

void ZipWriter::add(const std::string& name, const std::vector<ByteSpan>& parts) {
  const std::string& path = state_->staged.path();
  zip_t* archive = state_->archive.get();
  if (name.size() > kMaxZipNameLength) throw file_error(path, "ZIP entry name '" + printable(name) + "' is too long");
  std::vector<zip_buffer_fragment_t> fragments;
  for (const ByteSpan& part : parts) {
    fragments.push_back({static_cast<zip_uint8_t*>(const_cast<void*>(part.data)), part.size});
  }
  zip_source_t* source = zip_source_buffer_fragment(archive, fragments.data(), fragments.size(), 0);
  if (!source) throw file_error(path, "cannot write (libzip: " + libzip_text(zip_get_error(archive)) + ")");
  const zip_int64_t index = zip_file_add(archive, name.c_str(), source, ZIP_FL_ENC_UTF_8);
  if (index < 0) {
    zip_source_free(source);
    throw file_error(path, "cannot add '" + printable(name) + "' (libzip: " + libzip_text(zip_get_error(archive)) + ")");
  }
  const auto i = static_cast<zip_uint64_t>(index);
  if (zip_set_file_compression(archive, i, ZIP_CM_STORE, 0) != 0 || zip_file_set_mtime(archive, i, dos_epoch(), 0) != 0) {
    throw file_error(path, "cannot add '" + printable(name) + "' (libzip: " + libzip_text(zip_get_error(archive)) + ")");
  }
  ++state_->entries;
}

void ZipWriter::finish() {
  StagedFile& staged = state_->staged;
  if (state_->entries == 0) {
    state_->archive.reset();
    write_empty_archive(staged.path(), staged.temp_path());
  } else {
    zip_t* archive = state_->archive.get();
    if (zip_close(archive) != 0) {
      throw file_error(staged.path(), "cannot write (libzip: " + libzip_text(zip_get_error(archive)) + ")");
    }
    state_->archive.release();  // zip_close freed it
  }
  staged.commit();
}

}  // namespace fc

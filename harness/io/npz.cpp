#include "harness/io/npz.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <new>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/resource_usage.h"
#include "harness/io/npy.h"
#include "harness/io/printable.h"
#include "harness/io/zip_archive.h"

namespace fc {
namespace {

constexpr std::string_view kSuffix = ".npy";

std::string array_name(const std::string& entry_name) {
  if (entry_name.size() > kSuffix.size() &&
      std::string_view(entry_name).substr(entry_name.size() - kSuffix.size()) == kSuffix) {
    return entry_name.substr(0, entry_name.size() - kSuffix.size());
  }
  return entry_name;
}

// A deflated entry's recorded size must be the one its .npy header implies, checked before
// the reader allocates that size for the whole array.
ZipPrefixCheck npy_size_check(const ZipEntry& entry) {
  return {kMaxNpyHeaderBytes, [&entry](const std::uint8_t* prefix, std::size_t size) {
            const std::uint64_t implied = npy_image_size(entry.origin, prefix, size);
            if (implied != entry.size) {
              throw file_error(entry.origin, "recorded size " + std::to_string(entry.size) +
                                                 " does not match the " + std::to_string(implied) +
                                                 " bytes its .npy header implies");
            }
          }};
}

void check_writable(const std::string& path, const std::string& key, const HostTensor& tensor) {
  if (key.empty() || key.find('\0') != std::string::npos ||
      key.size() > kMaxZipNameLength - kSuffix.size()) {
    throw file_error(path, "bad array name '" + printable(key) + "'");
  }
  const auto expected = static_cast<std::uint64_t>(tensor.numel()) * dtype_size(tensor.dtype());
  if (tensor.nbytes() != expected) {
    throw file_error(path, "array '" + printable(key) + "' holds " +
                               std::to_string(tensor.nbytes()) + " bytes, dims " +
                               dims_string(tensor.dims()) + " need " + std::to_string(expected));
  }
}

}  // namespace

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  const ZipReader zip(path, ".npz archive");
  // Each array is read whole and then converted: its image and its tensor at once, besides the
  // arrays before it. A small compressed file can declare far more than the machine holds.
  const std::vector<ZipEntry> entries = zip.entries();
  std::uint64_t total = 0, largest = 0;
  for (const ZipEntry& entry : entries) {
    total += entry.size;
    largest = std::max<std::uint64_t>(largest, entry.size);
  }
  const double host = static_cast<double>(physical_host_bytes());
  if (host > 0 && static_cast<double>(total) + static_cast<double>(largest) > host) {
    char text[200];
    std::snprintf(text, sizeof text, "its arrays hold %.1f GiB uncompressed, the largest %.1f GiB; reading them needs "
                  "more than this machine's %.1f GiB", static_cast<double>(total) / (1 << 30),
                  static_cast<double>(largest) / (1 << 30), host / (1 << 30));
    throw file_error(path, text);
  }
  std::map<std::string, NpyArray> arrays;
  try {
    for (const ZipEntry& entry : entries) {
      const std::string name = array_name(entry.name);
      if (arrays.count(name)) throw file_error(path, "duplicate array '" + printable(name) + "'");
      const ByteBuffer image = zip.read(entry, npy_size_check(entry));
      arrays.emplace(name, parse_npy(entry.origin, image.data(), image.size()));
    }
  } catch (const std::bad_alloc&) {
    throw file_error(path, "out of memory");
  }
  return arrays;
}

void write_npz(const std::string& path, const std::map<std::string, HostTensor>& arrays) {
  for (const auto& [key, tensor] : arrays) check_writable(path, key, tensor);
  ZipWriter zip(path);
  std::vector<std::vector<std::uint8_t>> headers;  // read by finish(), as the tensors are
  for (const auto& [key, tensor] : arrays) {
    const std::vector<std::uint8_t>& header = headers.emplace_back(npy_header(tensor));
    zip.add(key + std::string(kSuffix), {{header.data(), header.size()}, {tensor.data(), tensor.nbytes()}});
  }
  zip.finish();
}

}  // namespace fc

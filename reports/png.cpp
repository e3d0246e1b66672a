#include "reports/png.h"

#include <zlib.h>

#include <cstdio>

#include "core/error.h"

namespace fc {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

// length, type, data, CRC of type and data (PNG spec, section 5.3).
void put_chunk(std::string& out, const char type[4], const std::string& data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::string typed = std::string(type, 4) + data;
  out += typed;
  const auto* bytes = reinterpret_cast<const Bytef*>(typed.data());
  put_u32(out, static_cast<std::uint32_t>(crc32(crc32(0L, Z_NULL, 0), bytes, static_cast<uInt>(typed.size()))));
}

}  // namespace

std::string hex_color(const Rgb& c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::string encode_indexed_png(std::int64_t width, std::int64_t height, const std::vector<std::uint8_t>& pixels,
                               const std::vector<Rgb>& palette) {
  if (width < 1 || height < 1 || width > (1 << 24) || height > (1 << 24)) {
    throw Error("png: image size " + std::to_string(width) + "x" + std::to_string(height) + " out of range");
  }
  if (static_cast<std::int64_t>(pixels.size()) != width * height) throw Error("png: pixel count differs from the size");
  if (palette.empty() || palette.size() > 256) throw Error("png: a palette has 1 to 256 entries");
  for (std::uint8_t p : pixels) {
    if (p >= palette.size()) throw Error("png: pixel index " + std::to_string(p) + " outside the palette");
  }

  // Each scanline is preceded by its filter type; 0 (none) is the one palettes do best with.
  std::string raw;
  raw.reserve(static_cast<std::size_t>((width + 1) * height));
  for (std::int64_t y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.append(reinterpret_cast<const char*>(pixels.data() + y * width), static_cast<std::size_t>(width));
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  const int status = compress2(reinterpret_cast<Bytef*>(&packed[0]), &packed_size,
                               reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION);
  if (status != Z_OK) throw Error("png: zlib compress2 failed with status " + std::to_string(status));
  packed.resize(packed_size);

  std::string header;
  put_u32(header, static_cast<std::uint32_t>(width));
  put_u32(header, static_cast<std::uint32_t>(height));
  header += std::string{8, 3, 0, 0, 0};  // bit depth 8, colour type 3 (indexed), deflate, filter 0, no interlace
  std::string plte;
  for (const Rgb& c : palette) plte += std::string{static_cast<char>(c.r), static_cast<char>(c.g), static_cast<char>(c.b)};

  std::string png("\x89PNG\r\n\x1a\n", 8);
  put_chunk(png, "IHDR", header);
  put_chunk(png, "PLTE", plte);
  put_chunk(png, "IDAT", packed);
  put_chunk(png, "IEND", "");
  return png;
}

}  // namespace fc

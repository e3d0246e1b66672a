#pragma once
// A minimal PNG encoder for heatmaps: 8-bit indexed colour (a palette of at most 256
// entries), one IDAT compressed with zlib's deflate. Enough for browsers and image tools.
#include <cstdint>
#include <string>
#include <vector>

namespace fc {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};
std::string hex_color(const Rgb& c);  // "#rrggbb"

// `pixels`: width x height palette indices, row-major, top row first.
std::string encode_indexed_png(std::int64_t width, std::int64_t height, const std::vector<std::uint8_t>& pixels,
                               const std::vector<Rgb>& palette);

}  // namespace fc

#pragma once
// Internal to harness/io: little-endian integers in memory, as .npy stores them.
// Reading goes through ByteCursor, which checks every read against the structure's bounds;
// writing appends to a byte vector.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace fc {

inline std::uint64_t load_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Bounds-checked little-endian reads over one in-memory structure.
class ByteCursor {
 public:
  ByteCursor(std::string origin, std::string what, const std::uint8_t* data, std::size_t size)
      : origin_(std::move(origin)), what_(std::move(what)), data_(data), size_(size) {}

  std::uint16_t u16() { return static_cast<std::uint16_t>(load_le(take(2), 2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(load_le(take(4), 4)); }
  std::uint64_t u64() { return load_le(take(8), 8); }
  const std::uint8_t* take(std::size_t n) {
    if (n > size_ - pos_) throw file_error(origin_, "truncated " + what_);
    const std::uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  std::string text(std::size_t n) { return std::string(reinterpret_cast<const char*>(take(n)), n); }
  void skip(std::size_t n) { take(n); }
  std::size_t remaining() const { return size_ - pos_; }

 private:
  std::string origin_;
  std::string what_;
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

inline void put16(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void put32(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

}  // namespace fc

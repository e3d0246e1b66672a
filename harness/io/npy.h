#pragma once
// One NumPy .npy image in memory: parsed into a host tensor (or a string), hardened against
// damaged input, every problem an fc::Error "ORIGIN: what"; and the header that writing one
// needs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fc {

struct NpyArray {
  HostTensor tensor;  // numeric/bool arrays, converted to C (row-major) order, native little-endian
  std::string text;   // for string arrays ('<U..' or '|S..') of shape (): the string
  bool is_text = false;
};

// Parse one .npy image; `origin` (e.g. "report.npz: q.npy") prefixes every error.
NpyArray parse_npy(const std::string& origin, const std::uint8_t* data, std::size_t size);

// Magic, version and length (12 bytes at most) and a header dictionary of up to 1 MiB
// (NumPy writes ~128 bytes): the most bytes npy_image_size reads.
constexpr std::size_t kMaxNpyHeaderBytes = 12 + (std::size_t{1} << 20);

// The size of the whole image that starts with `data` (which may hold only its start),
// as its header says: header plus data bytes. Throws as parse_npy does on a bad header.
std::uint64_t npy_image_size(const std::string& origin, const std::uint8_t* data,
                             std::size_t size);

// The .npy header for `tensor` (numeric/bool only), exactly as NumPy writes it; the image
// is this header followed by the tensor's bytes. bf16 is written as '<u2'.
std::vector<std::uint8_t> npy_header(const HostTensor& tensor);

}  // namespace fc

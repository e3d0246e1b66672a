// The .npy format parsed here rather than by a library: Debian and Ubuntu package none that
// reads it into tensors whose type is known only at run time. cnpy is not packaged;
// xtensor's xnpy (libxtensor-dev) needs the element type at compile time, reads no string
// arrays and throws std::runtime_error on damage, where we need the file and array named in
// one fc::Error line. The format is one short header (a Python dict literal) and raw bytes,
// so the parser is that grammar with a bound on every read.
#include "harness/io/npy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "harness/io/little_endian.h"
#include "harness/io/printable.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "harness/io/npy.cpp assumes a little-endian host (HostTensor holds native bytes)"
#endif

namespace fc {
namespace {

constexpr std::size_t kMaxNpyHeaderLength = kMaxNpyHeaderBytes - 12;  // the dictionary
constexpr int kMaxHeaderNesting = 16;
constexpr int kMaxRank = 64;

// The header is a Python dict literal, e.g.
// "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }".
struct PyValue {
  enum class Kind { string, integer, identifier, tuple, list };
  Kind kind = Kind::string;
  std::string text;           // string contents or identifier
  std::uint64_t integer = 0;  // magnitude of an integer
  bool negative = false;
  std::vector<PyValue> items;  // tuple / list
  std::string_view source;     // the literal as written, for messages
};

class HeaderParser {
 public:
  HeaderParser(const std::string& origin, std::string_view text) : origin_(origin), text_(text) {}

  // Key/value pairs of the dict, in file order; the whole text must be the dict.
  std::vector<std::pair<std::string, PyValue>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> entries;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      if (peek() != '\'' && peek() != '"') fail("expected a quoted key");
      std::string key = parse_string();
      skip_space();
      expect(':');
      entries.emplace_back(std::move(key), parse_value(0));
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail("expected ',' or '}'");
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the dictionary");
    return entries;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\n')) {
      ++pos_;
    }
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const std::string_view near = text_.substr(std::min(pos_, text_.size()), 24);
    throw file_error(
        origin_, "bad .npy header: " + what + " at offset " + std::to_string(pos_) +
                     (near.empty() ? std::string(" (end)") : " near '" + printable(near) + "'"));
  }

  PyValue parse_value(int depth) {
    if (depth > kMaxHeaderNesting) fail("nesting too deep");
    skip_space();
    const std::size_t start = pos_;
    PyValue value;
    const char c = peek();
    if (c == '\'' || c == '"') {
      value.kind = PyValue::Kind::string;
      value.text = parse_string();
    } else if (c == '(' || c == '[') {
      value.kind = c == '(' ? PyValue::Kind::tuple : PyValue::Kind::list;
      parse_sequence(value, c == '(' ? ')' : ']', depth);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value.kind = PyValue::Kind::integer;
      parse_integer(value);
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      value.kind = PyValue::Kind::identifier;
      while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')
        value.text += text_[pos_++];
    } else {
      fail("expected a value");
    }
    value.source = text_.substr(start, pos_ - start);
    return value;
  }

  std::string parse_string() {
    const char quote = text_[pos_++];
    std::string s;
    for (;;) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == quote) return s;
      if (c == '\\') fail("escape sequences are not supported");
      s += c;
    }
  }

  void parse_sequence(PyValue& value, char close, int depth) {
    ++pos_;
    for (;;) {
      skip_space();
      if (peek() == close) break;
      value.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != close) {
        fail(std::string("expected ',' or '") + close + "'");
      }
    }
    ++pos_;
  }

  void parse_integer(PyValue& value) {
    if (peek() == '-') {
      value.negative = true;
      ++pos_;
    }
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit");
    while (peek() >= '0' && peek() <= '9') {
      const unsigned digit = static_cast<unsigned>(peek() - '0');
      if (value.integer > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
        fail("integer too large");
      value.integer = value.integer * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2 long, in files from old NumPy
  }

  const std::string& origin_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

enum class ElementKind { numeric, bytes_text, utf32_text };

struct ElementType {
  ElementKind kind = ElementKind::numeric;
  DType dtype = DType::f64;  // numeric only
  std::size_t itemsize = 0;
  bool big_endian = false;
};

struct NpyHeader {
  ElementType element;
  std::string descr;
  Dims dims;
  bool fortran_order = false;
  std::size_t data_offset = 0;   // bytes from the start of the image
  std::uint64_t data_bytes = 0;  // prod(shape) * itemsize
};

[[noreturn]] void unsupported_dtype(const std::string& origin, std::string_view descr) {
  throw file_error(origin, "unsupported dtype '" + printable(descr) + "'");
}

// "<f4" -> fp32 little-endian, ">U8" -> UTF-32 big-endian text of 8 characters, ...
ElementType parse_descr(const std::string& origin, const std::string& descr) {
  const char order = descr.empty() ? '\0' : descr[0];
  if (descr.size() < 3 || (order != '<' && order != '>' && order != '|' && order != '=')) {
    unsupported_dtype(origin, descr);
  }
  const char kind = descr[1];
  std::size_t count = 0;
  for (std::size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || count > (std::size_t{1} << 30))
      unsupported_dtype(origin, descr);
    count = count * 10 + static_cast<std::size_t>(descr[i] - '0');
  }
  ElementType element;
  element.big_endian = order == '>';
  if (kind == 'S') {
    element.kind = ElementKind::bytes_text;
    element.itemsize = count;
    return element;
  }
  if (kind == 'U') {
    if (order == '|') unsupported_dtype(origin, descr);
    element.kind = ElementKind::utf32_text;
    element.itemsize = count * 4;
    return element;
  }
  struct Numeric {
    char kind;
    std::size_t size;
    DType dtype;
  };
  static constexpr Numeric kNumeric[] = {
      {'f', 2, DType::f16}, {'f', 4, DType::f32}, {'f', 8, DType::f64}, {'b', 1, DType::boolean},
      {'u', 1, DType::u8},  {'u', 2, DType::u16}, {'i', 4, DType::i32}, {'i', 8, DType::i64}};
  for (const Numeric& n : kNumeric) {
    if (n.kind != kind || n.size != count) continue;
    if (count > 1 && order == '|') unsupported_dtype(origin, descr);  // multi-byte needs an order
    element.dtype = n.dtype;
    element.itemsize = count;
    element.big_endian = count > 1 && order == '>';
    return element;
  }
  unsupported_dtype(origin, descr);
}

Dims parse_shape(const std::string& origin, const PyValue& shape) {
  if (shape.kind != PyValue::Kind::tuple) {
    throw file_error(origin, "bad .npy header: 'shape' is not a tuple: " + printable(shape.source));
  }
  if (shape.items.size() > static_cast<std::size_t>(kMaxRank)) {
    throw file_error(
        origin, "bad .npy header: rank " + std::to_string(shape.items.size()) + " is too large");
  }
  Dims dims;
  for (const PyValue& d : shape.items) {
    if (d.kind != PyValue::Kind::integer || d.negative ||
        d.integer > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw file_error(origin, "bad .npy header: 'shape' must hold non-negative integers, got " +
                                   printable(shape.source));
    }
    dims.push_back(static_cast<std::int64_t>(d.integer));
  }
  return dims;
}

// prod(dims) * itemsize, refusing anything whose partial products overflow int64.
std::uint64_t data_bytes_of(const std::string& origin, const Dims& dims, std::size_t itemsize) {
  constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t bytes = itemsize;
  std::uint64_t count = 1;
  for (std::int64_t d : dims) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && (count > kLimit / u || (bytes != 0 && bytes > kLimit / u))) {
      throw file_error(origin, "shape " + dims_string(dims) + " is too large");
    }
    count *= u;
    bytes *= u;
  }
  return bytes;
}

NpyHeader parse_npy_header(const std::string& origin, const std::uint8_t* data, std::size_t size) {
  ByteCursor cursor(origin, ".npy header", data, size);
  static constexpr std::uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < sizeof kMagic || std::memcmp(data, kMagic, sizeof kMagic) != 0) {
    throw file_error(origin, "not a .npy array (bad magic)");
  }
  cursor.skip(sizeof kMagic);
  const std::uint8_t* version = cursor.take(2);
  if (version[0] < 1 || version[0] > 3 || version[1] != 0) {
    throw file_error(origin, "unsupported .npy version " + std::to_string(version[0]) + "." +
                                 std::to_string(version[1]));
  }
  const std::size_t header_length = version[0] == 1 ? cursor.u16() : cursor.u32();
  if (header_length > kMaxNpyHeaderLength) {
    throw file_error(origin,
                     "bad .npy header: length " + std::to_string(header_length) + " is too large");
  }
  const std::string_view text(reinterpret_cast<const char*>(cursor.take(header_length)),
                              header_length);

  NpyHeader header;
  header.data_offset = size - cursor.remaining();
  bool have_descr = false, have_order = false, have_shape = false;
  for (auto& [key, value] : HeaderParser(origin, text).parse_dict()) {
    bool* seen = key == "descr"           ? &have_descr
                 : key == "fortran_order" ? &have_order
                 : key == "shape"         ? &have_shape
                                          : nullptr;
    if (!seen) throw file_error(origin, "bad .npy header: unexpected key '" + printable(key) + "'");
    if (*seen) throw file_error(origin, "bad .npy header: duplicate key '" + printable(key) + "'");
    *seen = true;
    if (key == "descr") {
      if (value.kind != PyValue::Kind::string) unsupported_dtype(origin, value.source);
      header.descr = value.text;
    } else if (key == "fortran_order") {
      if (value.kind != PyValue::Kind::identifier ||
          (value.text != "True" && value.text != "False")) {
        throw file_error(origin, "bad .npy header: 'fortran_order' must be True or False, got " +
                                     printable(value.source));
      }
      header.fortran_order = value.text == "True";
    } else {
      header.dims = parse_shape(origin, value);
    }
  }
  for (auto [seen, key] : {std::pair{have_descr, "descr"}, std::pair{have_order, "fortran_order"},
                           std::pair{have_shape, "shape"}}) {
    if (!seen) throw file_error(origin, std::string("bad .npy header: no '") + key + "'");
  }
  header.element = parse_descr(origin, header.descr);
  header.data_bytes = data_bytes_of(origin, header.dims, header.element.itemsize);
  return header;
}


void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// NumPy pads strings to the item size with NULs; like NumPy, drop the trailing ones.
std::string decode_text(const std::string& origin, const ElementType& element,
                        const std::uint8_t* p) {
  if (element.kind == ElementKind::bytes_text) {
    std::size_t n = element.itemsize;
    while (n > 0 && p[n - 1] == 0) --n;
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  std::size_t chars = element.itemsize / 4;
  auto code_point = [&](std::size_t i) {
    const std::uint8_t* q = p + 4 * i;
    const std::uint8_t ordered[4] = {q[3], q[2], q[1], q[0]};
    return static_cast<std::uint32_t>(load_le(element.big_endian ? ordered : q, 4));
  };
  while (chars > 0 && code_point(chars - 1) == 0) --chars;
  std::string out;
  for (std::size_t i = 0; i < chars; ++i) {
    const std::uint32_t cp = code_point(i);
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "0x%x", cp);
      throw file_error(origin, std::string("invalid code point ") + hex + " in string array");
    }
    append_utf8(out, cp);
  }
  return out;
}

// Column-major source to row-major destination, any rank: walk the destination in order
// and keep the matching source element index up to date.
void fortran_to_c_order(const std::uint8_t* src, std::uint8_t* dst, const Dims& dims,
                        std::size_t itemsize) {
  const std::uint64_t count = static_cast<std::uint64_t>(numel_of(dims));
  if (count == 0) return;
  const std::size_t rank = dims.size();
  std::vector<std::uint64_t> source_stride(rank, 1);
  for (std::size_t k = 1; k < rank; ++k)
    source_stride[k] = source_stride[k - 1] * static_cast<std::uint64_t>(dims[k - 1]);
  std::vector<std::int64_t> index(rank, 0);
  std::uint64_t source = 0;
  for (std::uint64_t out = 0; out < count; ++out) {
    std::memcpy(dst + out * itemsize, src + source * itemsize, itemsize);
    for (std::size_t k = rank; k-- > 0;) {
      if (++index[k] < dims[k]) {
        source += source_stride[k];
        break;
      }
      source -= source_stride[k] * static_cast<std::uint64_t>(dims[k] - 1);
      index[k] = 0;
    }
  }
}

void swap_elements(std::uint8_t* data, std::uint64_t count, std::size_t itemsize) {
  for (std::uint64_t i = 0; i < count; ++i)
    std::reverse(data + i * itemsize, data + (i + 1) * itemsize);
}

HostTensor numeric_tensor(const std::string& origin, const NpyHeader& header,
                          const std::uint8_t* data) {
  HostTensor tensor;
  try {
    tensor = HostTensor(header.element.dtype, header.dims);
  } catch (const std::bad_alloc&) {
    throw file_error(origin, "cannot allocate " + std::to_string(header.data_bytes) + " bytes");
  }
  auto* out = static_cast<std::uint8_t*>(tensor.data());
  const std::size_t itemsize = header.element.itemsize;
  if (header.fortran_order && header.dims.size() > 1) {
    fortran_to_c_order(data, out, header.dims, itemsize);
  } else if (header.data_bytes > 0) {
    std::memcpy(out, data, static_cast<std::size_t>(header.data_bytes));
  }
  const auto count = static_cast<std::uint64_t>(tensor.numel());
  if (header.element.big_endian) swap_elements(out, count, itemsize);
  if (header.element.dtype == DType::boolean) {
    for (std::uint64_t i = 0; i < count; ++i) out[i] = out[i] != 0;
  }
  return tensor;
}

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return "<f2";
    case DType::bf16:
      return "<u2";  // NumPy has no bfloat16: keep the bits
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::boolean:
      return "|b1";
    case DType::i32:
      return "<i4";
    case DType::i64:
      return "<i8";
    case DType::u8:
      return "|u1";
    case DType::u16:
      return "<u2";
  }
  throw Error("unknown dtype");
}

std::string python_tuple(const Dims& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

}  // namespace

NpyArray parse_npy(const std::string& origin, const std::uint8_t* data, std::size_t size) {
  if (!data && size != 0) throw file_error(origin, "no data");
  const NpyHeader header = parse_npy_header(origin, data, size);
  const std::uint64_t available = size - header.data_offset;
  if (available != header.data_bytes) {
    throw file_error(origin, "data is " + std::to_string(available) + " bytes, but shape " +
                                 dims_string(header.dims) + " of '" + printable(header.descr) +
                                 "' needs " + std::to_string(header.data_bytes));
  }
  const std::uint8_t* payload = data + header.data_offset;
  NpyArray array;
  if (header.element.kind == ElementKind::numeric) {
    array.tensor = numeric_tensor(origin, header, payload);
    return array;
  }
  if (!(header.dims.empty() || (header.dims.size() == 1 && header.dims[0] == 1))) {
    throw file_error(origin, "string arrays are supported only with shape () or (1,), got " +
                                 dims_string(header.dims));
  }
  array.is_text = true;
  array.text = decode_text(origin, header.element, payload);
  return array;
}

std::uint64_t npy_image_size(const std::string& origin, const std::uint8_t* data,
                             std::size_t size) {
  const NpyHeader header = parse_npy_header(origin, data, size);
  return header.data_offset + header.data_bytes;
}

// Exactly as NumPy writes it: keys sorted, spare spaces so the first axis can grow in
// place, padded with spaces and '\n' so the data starts on a 64-byte boundary. Version 1.0
// stores the header length in 16 bits; 2.0 in 32.
std::vector<std::uint8_t> npy_header(const HostTensor& tensor) {
  constexpr std::size_t kGrowthAxisDigits = 21;
  constexpr std::size_t kAlign = 64;
  std::string dict = std::string("{'descr': '") + npy_descr(tensor.dtype()) +
                     "', 'fortran_order': False, 'shape': " + python_tuple(tensor.dims()) + ", }";
  if (tensor.rank() > 0) dict.append(kGrowthAxisDigits - std::to_string(tensor.dim(0)).size(), ' ');
  const bool version1 = dict.size() + 1 + kAlign <= 0xffff;
  const std::size_t prefix = version1 ? 10 : 12;
  const std::size_t padding = kAlign - (prefix + dict.size() + 1) % kAlign;
  const std::size_t length = dict.size() + padding + 1;

  std::vector<std::uint8_t> out = {
      0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version1 ? 1 : 2), 0};
  version1 ? put16(out, length) : put32(out, length);
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), padding, ' ');
  out.push_back('\n');
  return out;
}

}  // namespace fc

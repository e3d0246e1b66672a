#pragma once
// A small streaming JSON writer: objects, arrays, strings with escaping, numbers (NaN and
// infinities as the strings "nan", "inf", "-inf", which JSON has no literal for), null.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace fc {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(const std::string& k);
  JsonWriter& value(const std::string& v);
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& value(double v);
  JsonWriter& value(std::int64_t v);
  JsonWriter& value(std::uint64_t v) { return value(static_cast<std::int64_t>(v)); }
  JsonWriter& value(int v) { return value(static_cast<std::int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& null();

  template <class T>
  JsonWriter& field(const std::string& k, const T& v) {
    key(k);
    return value(v);
  }

 private:
  void separate();
  void newline();
  std::ostream& out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

std::string json_escape(const std::string& s);

}  // namespace fc

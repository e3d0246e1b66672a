#include "core/json_writer.h"

#include <cmath>
#include <cstdio>

namespace fc {

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

void JsonWriter::newline() {
  out_ << '\n';
  for (std::size_t i = 0; i < first_.size(); ++i) out_ << "  ";
}

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ << ',';
    first_.back() = false;
    newline();
  }
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  out_ << '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  out_ << '}';
  if (first_.empty()) out_ << '\n';
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ << '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  out_ << ']';
  return *this;
}

JsonWriter& JsonWriter::key(const std::string& k) {
  separate();
  out_ << '"' << json_escape(k) << "\": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(const std::string& v) {
  separate();
  out_ << '"' << json_escape(v) << '"';
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  separate();
  if (std::isnan(v)) {
    out_ << "\"nan\"";
  } else if (std::isinf(v)) {
    out_ << (v > 0 ? "\"inf\"" : "\"-inf\"");
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    out_ << buf;
  }
  return *this;
}

JsonWriter& JsonWriter::value(std::int64_t v) {
  separate();
  out_ << v;
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  separate();
  out_ << (v ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_ << "null";
  return *this;
}

}  // namespace fc

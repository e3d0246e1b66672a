#include "harness/check/arithmetic_spec.h"

#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace fc {
namespace {

struct Preset {
  const char* name;
  ArithmeticSpec spec;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all{
      {"fp16-fp32acc", {DType::f16, DType::f32, DType::f32, DType::f16, DType::f16, true}},
      {"bf16-fp32acc", {DType::bf16, DType::f32, DType::f32, DType::bf16, DType::bf16, true}},
      {"fp16-fp16acc", {DType::f16, DType::f16, DType::f32, DType::f16, DType::f16, true}},
      {"fp32", {DType::f32, DType::f32, DType::f32, DType::f32, DType::f32, false}},
  };
  return all;
}

[[noreturn]] void refuse(const std::string& text, const std::string& what) {
  throw Error("--arithmetic '" + text + "': " + what + " (" + arithmetic_help() + ")");
}

DType format(const std::string& text, const std::string& key, const std::string& value) {
  const std::optional<DType> d = parse_dtype(value);
  if (!d || (*d != DType::f16 && *d != DType::bf16 && *d != DType::f32)) {
    refuse(text, key + "=" + value + ": the format is fp16, bf16 or fp32");
  }
  return *d;
}

}  // namespace

std::string arithmetic_help() {
  std::string names;
  for (const Preset& p : presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
  return "a preset (" + names + ") and/or input=F, accumulate=F, scores=F, probs=F, output=F (F: fp16, bf16, fp32), "
         "tensor-cores=yes|no, joined by ',' (the preset first, each once)";
}

ArithmeticSpec parse_arithmetic(const std::string& text) {
  ArithmeticSpec spec;
  std::istringstream items(text);
  std::string item;
  bool any = false, preset = false;
  std::set<std::string> keys;  // a preset then keys that change it; nothing given twice, nothing replaced unseen
  while (std::getline(items, item, ',')) {
    any = true;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (preset) refuse(text, "a second preset '" + item + "' would replace the first");
      if (!keys.empty()) refuse(text, "the preset '" + item + "' would replace " + *keys.begin() + "=, given before it");
      preset = true;
      bool found = false;
      for (const Preset& p : presets()) {
        if (item != p.name) continue;
        spec = p.spec;
        found = true;
      }
      if (!found) refuse(text, "unknown preset '" + item + "'");
      continue;
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!keys.insert(key).second) refuse(text, key + "= given twice");
    if (key == "input") {
      spec.input = format(text, key, value);
    } else if (key == "accumulate") {
      spec.accumulate = format(text, key, value);
      if (*spec.accumulate == DType::bf16) refuse(text, "a bf16 accumulator is not modelled");
    } else if (key == "scores") {
      spec.scores = format(text, key, value);
    } else if (key == "probs") {
      spec.probs = format(text, key, value);
    } else if (key == "output") {
      spec.output = format(text, key, value);
    } else if (key == "tensor-cores") {
      if (value != "yes" && value != "no") refuse(text, "tensor-cores is yes or no");
      spec.tensor_cores = value == "yes";
    } else {
      refuse(text, "unknown key '" + key + "'");
    }
  }
  if (!any) refuse(text, "empty");
  return spec;
}

}  // namespace fc

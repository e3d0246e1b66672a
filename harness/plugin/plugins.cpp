#include "harness/plugin/plugins.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "core/error.h"
#include "harness/faults/catalog.h"
#include "harness/plugin/plugin_implementation.h"

namespace fc {
namespace {

std::vector<std::shared_ptr<const PluginLibrary>>& loaded() {
  static std::vector<std::shared_ptr<const PluginLibrary>> libraries;
  return libraries;
}

std::vector<std::unique_ptr<Implementation>> plugin_implementations() {
  std::vector<std::unique_ptr<Implementation>> impls;
  for (const auto& library : loaded()) {
    const fc_plugin& p = library->description();
    for (std::uint32_t i = 0; i < p.implementation_count; ++i) {
      impls.push_back(make_plugin_implementation(library, p.implementations[i]));
    }
  }
  return impls;
}

// The catalog entry of a fault the plugin declares: its trigger case in our terms, and the
// expectation as the plugin states it (it cannot replay its own bug in FP64).
FaultSpec fault_spec(const PluginLibrary& library, const fc_implementation& impl, const fc_fault& f) {
  const std::string where = library.where() + ": fault '" + f.id + "'";
  FaultSpec spec;
  spec.id = f.id;
  spec.bug = f.bug;
  spec.impls = {impl.name};
  try {
    spec.trigger.shape = parse_shape(f.shape);
    const std::optional<DType> dtype = parse_dtype(f.dtype);
    if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16)) throw Error(std::string("dtype '") + f.dtype + "'");
    spec.trigger.dtype = *dtype;
    spec.trigger.mask = f.mask;
    spec.trigger.dist = f.dist;
    spec.trigger.seed = f.seed;
    const Problem trigger = make_problem(spec.trigger);  // an unknown mask or distribution is refused now
    // A trigger the implementation would skip would leave its cell empty, graded as a miss.
    if (const std::optional<std::string> why = outside_plugin_features(impl.features, trigger)) {
      throw Error("'" + std::string(impl.name) + "' would skip it: " + *why);
    }
  } catch (const Error& e) {
    throw Error(where + ": trigger case: " + e.what());
  }
  Expectation expected{f.expected_output, f.expected_cause, std::nullopt};
  if (f.has_index) expected.index = Index4{f.index[0], f.index[1], f.index[2], f.index[3]};
  spec.expected_stage = f.expected_output;
  spec.expected_cause = f.expected_cause;
  spec.expect = [expected](const AttentionInputs&, const StageGraph&) { return expected; };
  return spec;
}

}  // namespace

std::vector<std::string> plugins_from_environment() {
  std::vector<std::string> paths;
  const char* env = std::getenv("FLASHCORE_PLUGINS");
  if (!env) return paths;
  std::istringstream list(env);
  for (std::string path; std::getline(list, path, ':');) {
    if (!path.empty()) paths.push_back(path);
  }
  return paths;
}

void load_plugins(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::string>> all;  // path, where it was given
  for (const std::string& path : plugins_from_environment()) all.emplace_back(path, "FLASHCORE_PLUGINS entry");
  for (const std::string& path : paths) all.emplace_back(path, "--plugin");
  if (all.empty()) return;
  std::set<std::string> names;
  for (const auto& impl : make_implementations()) names.insert(impl->name());
  std::set<std::string> seen;
  for (const auto& [path, origin] : all) {
    // Named twice, by whatever spelling (relative, absolute, through a link): loaded once. A path
    // that does not resolve is left to the loader, which says why.
    std::error_code unresolved;
    const std::filesystem::path file = std::filesystem::canonical(path, unresolved);
    if (!seen.insert(unresolved ? path : file.string()).second) continue;
    auto library = std::make_shared<const PluginLibrary>(path, origin);
    const fc_plugin& p = library->description();
    std::vector<FaultSpec> faults;
    for (std::uint32_t i = 0; i < p.implementation_count; ++i) {
      const fc_implementation& impl = p.implementations[i];
      if (!names.insert(impl.name).second) {
        throw Error(library->where() + ": implementation '" + impl.name + "' is already taken (see `list`)");
      }
      for (std::uint32_t f = 0; f < impl.fault_count; ++f) faults.push_back(fault_spec(*library, impl, impl.faults[f]));
    }
    try {
      add_faults(faults);
    } catch (const Error& e) {
      throw Error(library->where() + ": " + e.what());
    }
    if (loaded().empty()) add_implementation_source(plugin_implementations);
    loaded().push_back(std::move(library));
  }
}

}  // namespace fc

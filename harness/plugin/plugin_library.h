#pragma once
// One loaded plugin library (include/flashcore/plugin.h): the dlopen handle, owned (closed
// when the last user lets go), and the description its entry point returned, checked: the
// ABI version, the struct sizes, every implementation's name and functions, every fault.
#include <string>

#include "core/problem.h"
#include "flashcore/plugin.h"

namespace fc {

class PluginLibrary {
 public:
  // An fc::Error "ORIGIN PATH: why" if the file cannot be loaded, lacks the entry symbol,
  // speaks another ABI version or describes itself inconsistently; a PluginFailure if
  // loading it crashes. `origin`: where the path was given ("--plugin", "FLASHCORE_PLUGINS entry").
  explicit PluginLibrary(std::string path, std::string origin = "--plugin");
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& path() const { return path_; }
  std::string where() const { return origin_ + " " + path_; }  // how load errors name it
  std::string who() const { return "plugin " + path_; }  // how messages name it
  const fc_plugin& description() const { return *plugin_; }

 private:
  void check() const;

  std::string path_;
  std::string origin_;
  void* handle_ = nullptr;
  const fc_plugin* plugin_ = nullptr;
};

// Our types of the plugin's numbers; nullopt-free: an unknown value is an fc::Error.
DType plugin_dtype(std::int32_t dtype);
std::int32_t plugin_dtype_of(DType dtype);

}  // namespace fc

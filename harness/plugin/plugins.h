#pragma once
// The plugins of this process: `--plugin PATH` (repeatable) and FLASHCORE_PLUGINS (paths
// joined by ':'), each loaded once before the command runs. Their implementations join the
// registry (kernels/implementation.h), after the built-in ones; their faults join the
// catalog (harness/faults/catalog.h).
#include <string>
#include <vector>

namespace fc {

// The paths of FLASHCORE_PLUGINS, then `paths`. A plugin that cannot be loaded, or whose
// implementation or fault names are taken, is an fc::Error; one that crashes while loading
// a PluginFailure.
void load_plugins(const std::vector<std::string>& paths);

// The plugins named by FLASHCORE_PLUGINS.
std::vector<std::string> plugins_from_environment();

}  // namespace fc

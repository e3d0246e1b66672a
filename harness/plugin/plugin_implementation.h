#pragma once
// A plugin's implementation as an fc::Implementation, so that everything downstream of the
// tap (capture, comparison, attribution, reports, faults, benchmarks) is the one the
// built-in implementations go through. Every call into the plugin is guarded
// (crash_guard.h); a failure it reports, a crash, an exception, a view the tap refuses or a
// CUDA error after its kernels is a PluginFailure naming the plugin, the implementation and
// the call.
#include <memory>
#include <optional>
#include <string>

#include "harness/plugin/plugin_library.h"
#include "kernels/implementation.h"

namespace fc {

std::unique_ptr<Implementation> make_plugin_implementation(std::shared_ptr<const PluginLibrary> library,
                                                           const fc_implementation& declaration);

// Why a plugin with these features cannot run `problem` (a dtype, mask part or head dim it does
// not declare; what fc_problem cannot carry to it), or nullopt. No plugin code runs.
std::optional<std::string> outside_plugin_features(const fc_features& features, const Problem& problem);

// The plugin's description of a problem (fc_problem).
fc_problem plugin_problem(const Problem& problem);

}  // namespace fc

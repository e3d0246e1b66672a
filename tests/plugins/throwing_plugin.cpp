// A C++ plugin that breaks the boundary's first rule: its stage_graph throws. The harness
// must turn that into one line and exit 2 (tests/test_plugin.cpp).
#include <stdexcept>

#include "flashcore/plugin.h"

namespace {

void* create(char*, size_t) {
  static int instance;
  return &instance;
}
void destroy(void*) {}
int stage_graph(void*, const fc_problem*, const char*, const fc_graph_builder*, char*, size_t) {
  throw std::runtime_error("the throwing plugin's stage graph");
}
int prepare(void*, const fc_problem*, int32_t, const fc_workspace*, char*, size_t) { return FC_OK; }
int run(void*, const fc_run_args*, char*, size_t) { return FC_OK; }

const fc_implementation implementations[] = {{
    sizeof(fc_implementation), "throwing-plugin", "throws from stage_graph", 0,
    {FC_DTYPE_BIT(FC_DTYPE_F16) | FC_DTYPE_BIT(FC_DTYPE_BF16), 0xFFu, 0, 0, nullptr, 0},
    nullptr, 0, create, destroy, nullptr, stage_graph, prepare, run,
}};
const fc_plugin plugin = {FC_PLUGIN_ABI_VERSION, sizeof(fc_plugin), "throwing", 1, implementations};

}  // namespace

extern "C" FC_PLUGIN_EXPORT const fc_plugin* flashcore_plugin(void) { return &plugin; }

#include "harness/version.h"

namespace fc {
const char* tool_version() { return FLASHCORE_VERSION; }
const char* git_revision() { return FLASHCORE_GIT_REVISION; }
const char* cuda_architectures() { return FLASHCORE_CUDA_ARCHS; }
}  // namespace fc

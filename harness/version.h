#pragma once
// Build identity, baked in by CMake.
namespace fc {
const char* tool_version();
const char* git_revision();
const char* cuda_architectures();
}  // namespace fc

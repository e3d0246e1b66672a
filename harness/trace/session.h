#pragma once
// One traced run of one implementation on one case: prepare its buffers, poison them, run
// it with the capturing tap, read the flags back.
#include <string>
#include <vector>

#include "harness/trace/capture.h"
#include "kernels/implementation.h"

namespace fc {

struct TraceRun {
  StageGraph graph;
  std::vector<Captured> captured;
  std::vector<std::string> buffer_names;  // index: poison id
  std::vector<DescriptorReport> descriptors;  // cuBLASLt calls, read back and linted
  std::string error;                      // non-empty when the run itself failed
};

TraceRun run_traced(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                    bool copy_to_host);

}  // namespace fc

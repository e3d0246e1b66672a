#pragma once
// The race hypothesis: a kernel that reads memory before the write it depends on (a missing
// barrier, a stale buffer) gives different numbers on the same inputs from run to run. When
// no other hypothesis explains a divergence, the implementation runs again on the same
// inputs, in buffers poisoned the same way, and the failing output is compared with the first
// run's. A difference beyond the last bits (above 2^-10 of the value, or a NaN on one side)
// names the cause `race`; runs alike leave the
// divergence as it was (a race may still hide behind a schedule that repeats).
#include "harness/trace/session.h"
#include "reports/case_result.h"

namespace fc {

// Reruns at most this many times.
inline constexpr int kRepeatabilityRuns = 3;

// Updates `d` (cause and evidence) when the output it names differs between runs.
void test_repeatability(Implementation& impl, const AttentionInputs& inputs, const DeviceInputs* device,
                        const TraceRun& first, Divergence& d);

}  // namespace fc

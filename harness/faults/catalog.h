#pragma once
// The fault catalog (docs/faults.md): every bug the seed reports lived through, planted
// beside the code it breaks (Implementation::inject), with a case that triggers it and what
// the harness must find: the stage output, the cause id, and the first bad element, computed
// from the inputs by playing the faulty arithmetic in FP64.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/inputs.h"
#include "harness/trace/row_sample.h"
#include "reference/compare.h"
#include "stages/stage.h"

namespace fc {

struct Expectation {
  std::string output;  // "rescale[0]", "qk", ... ("*" for any stage, a race)
  std::string cause;   // a cause id ("*" for any)
  std::optional<Index4> index;  // the first bad element; none when no element can be named
};

struct FaultSpec {
  std::string id;
  std::string bug;                  // one sentence
  std::vector<std::string> impls;   // the implementations that have it
  CaseSpec trigger;                 // a case that makes it show
  std::string expected_stage;       // for `list`: "rescale[0]", "first qk with a score past 65504"
  std::string expected_cause;
  std::function<Expectation(const AttentionInputs&, const StageGraph&)> expect;
  bool keep_as_fixture = true;      // false: too large to keep (a race's trace of every tile, 4 GiB captures),
                                    // in fixtures or in the HTML report
  RowSpec rows{};                   // the rows judged (a sample at long context)
  // The faulty run may hang or fault the device (a race on a pipeline's barriers): `faults`
  // runs it in a child process (harness/faults/isolated_run.h), under this run time limit.
  bool isolated = false;
  double isolated_timeout_seconds = 30;
};

const std::vector<FaultSpec>& fault_catalog();
const FaultSpec* find_fault(const std::string& id);
// Faults planted in implementations from outside (plugins), added before any command runs;
// an id already in the catalog is an fc::Error.
void add_faults(const std::vector<FaultSpec>& faults);

}  // namespace fc

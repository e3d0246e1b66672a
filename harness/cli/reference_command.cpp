// flashcore-check reference REPORT.npz --out REF.h5 (written once the HDF5 and .npz modules land)
#include "core/error.h"
#include "harness/cli/commands.h"

namespace fc {
int run_reference(const ReferenceCommand&) { throw Error("reference: not built yet"); }
}  // namespace fc

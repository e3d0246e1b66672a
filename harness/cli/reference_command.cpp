// flashcore-check reference REPORT --out REF.h5: every reference stage of a case in FP64.
#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "harness/check/captured.h"
#include "harness/cli/commands.h"
#include "harness/io/capture_file.h"
#include "harness/io/case_loader.h"
#include "harness/io/staged_file.h"
#include "harness/io/streamed_reference.h"

namespace fc {

int run_reference(const ReferenceCommand& command) {
  if (command.page_width < 0 || command.splits < 0) throw Error("--page-width and --splits must be positive");
  check_output_path(command.out);
  const LoadedCase c = load_case(command.input);
  // An array no report holds ('is_casual') is refused, as triage and check do, and so are outputs
  // that disagree with the inputs (an `out` of another shape), though only q, k and v are read.
  const CaptureFile capture = read_capture_file(command.input);
  if (!capture.outputs.empty()) make_captured_implementation(c.inputs, capture, {});
  // A split or page holds at least one key: more of them than keys is no split-KV anyone runs,
  // and each split costs a head's output again (so a large count ran for hours).
  const std::int64_t keys = c.inputs.problem.shape.kv_len;
  if (command.splits > keys) {
    throw Error("--splits " + std::to_string(command.splits) + ": more splits than the report's " + std::to_string(keys) +
                " keys");
  }
  const ReferenceOptions options{command.page_width, command.splits};
  H5Writer out(command.out);
  // Refused now if the file system cannot hold it, not after hours of writing (a report of 200k
  // keys needs 640 GB): the references and the inputs, uncompressed.
  const double inputs = static_cast<double>(c.inputs.q.nbytes() + c.inputs.k.nbytes() + c.inputs.v.nbytes() +
                                            c.inputs.problem.mask.dense.nbytes());
  out.require_room("/", static_cast<std::size_t>(std::min(streamed_reference_bytes(c.inputs.problem.shape, options) + inputs, 1e19)));
  write_header(out, "reference", command.command_line, c.description, c.inputs);
  write_inputs(out, c.inputs);
  // Block of rows by block: no tensor of a whole head is held (harness/io/streamed_reference.h).
  const std::vector<MaskedRow> masked = write_reference_streamed(out, c.inputs, options);
  out.commit();
  std::cout << command.out << ": FP64 reference of " << c.inputs.problem.shape.to_string() << " "
            << dtype_name(c.inputs.problem.dtype) << ", mask " << c.inputs.problem.mask.describe() << ", scale "
            << c.inputs.problem.scale << "; " << masked.size() << " fully masked rows\n";
  return kExitPass;
}

}  // namespace fc

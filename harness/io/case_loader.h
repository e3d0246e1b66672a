#pragma once
// A case from a file, whichever form it comes in: a bug report in PyTorch SDPA form (.npz)
// or one of our HDF5 files (reference, snapshot, fixture). The form is told by the file's
// first bytes, not its name.
#include <string>

#include "harness/io/case_file.h"

namespace fc {

struct LoadedCase {
  AttentionInputs inputs;
  CaseDescription description;
  bool hdf5 = false;
};

LoadedCase load_case(const std::string& path);

// What a file is, by its first bytes: an fc::Error naming the file if it cannot be opened.
enum class FileForm { npz, hdf5, unknown };
FileForm file_form(const std::string& path);

}  // namespace fc

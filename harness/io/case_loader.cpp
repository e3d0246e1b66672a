#include "harness/io/case_loader.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "harness/io/sdpa_report.h"

namespace fc {
FileForm file_form(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error(path, "cannot open");
  char head[8] = {};
  in.read(head, sizeof head);
  if (in.gcount() >= 4 && head[0] == 'P' && head[1] == 'K') return FileForm::npz;
  if (in.gcount() == 8 && std::memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0) return FileForm::hdf5;
  return FileForm::unknown;
}

LoadedCase load_case(const std::string& path) {
  LoadedCase c;
  switch (file_form(path)) {
    case FileForm::npz: {
      c.inputs = read_sdpa_report(path);
      c.description.label = c.inputs.problem.shape.to_string() + " " + dtype_name(c.inputs.problem.dtype) + " " +
                            c.inputs.problem.mask.describe() + " from " + path;
      c.description.shape = c.inputs.problem.shape;
      c.description.dtype = c.inputs.problem.dtype;
      c.description.mask = c.inputs.problem.mask.describe();
      c.description.source = path;
      c.description.scale = c.inputs.problem.scale;
      return c;
    }
    case FileForm::hdf5: {
      CaseFile f = read_case_file(H5Reader(path));
      c.inputs = std::move(f.inputs);
      c.description = std::move(f.description);
      c.hdf5 = true;
      return c;
    }
    case FileForm::unknown: break;
  }
  throw file_error(path, "neither a .npz archive nor an HDF5 file");
}

}  // namespace fc

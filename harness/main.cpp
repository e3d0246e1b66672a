#include <hdf5.h>

#include "harness/cli/app.h"

int main(int argc, char** argv) {
  // Every HDF5 object of a run is closed by its owner before main returns. HDF5's own exit
  // handler would close again what a failed write left half-open, and crashed there: a segfault
  // after the run's one-line error, on a full file system. It is not installed.
  H5dont_atexit();
  return fc::run_cli(argc, argv);
}

// The file readers (the capture reader of check too) and replay fed damaged files in-process, for the AddressSanitizer +
// UBSan configuration (scripts/test): every reader must end in fc::Error or a result, with
// no memory error, no undefined behaviour, no other exception.
//   fc_fuzz_readers FIXTURE.h5 REPORT.npz [ROUNDS]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "core/rng.h"
#include "harness/io/capture_file.h"
#include "harness/io/case_loader.h"
#include "harness/io/snapshot.h"
#include "harness/trace/judge.h"
#include "support/file_mutations.h"

namespace {

namespace fs = std::filesystem;

// Reads `path` the way replay, fixtures and reference do, then as check does; true when the
// first refused it cleanly.
bool read_every_way(const std::string& path) {
  try {
    fc::read_capture_file(path);
  } catch (const fc::Error&) {
  }
  try {
    const fc::LoadedCase c = fc::load_case(path);
    if (c.hdf5) {
      fc::Snapshot s = fc::read_snapshot(fc::H5Reader(path));
      fc::judge_run(s.impl, s.file.inputs, s.file.description, s.run);
    }
    return false;
  } catch (const fc::Error&) {
    return true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: fc_fuzz_readers FIXTURE.h5 REPORT.npz [ROUNDS]\n";
    return 2;
  }
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 150;
  const fs::path dir = fs::temp_directory_path() / ("fc_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fc::Rng rng(2026, 11);
  int refused = 0, read = 0;
  int truncated = 0, truncated_refused = 0;  // a file cut short has lost data: every one refused
  try {
    for (const std::string& base : {std::string(argv[1]), std::string(argv[2])}) {
      const auto bytes = fc::test::read_bytes(base);
      const std::string file = (dir / fs::path(base).filename()).string();
      for (int i = 0; i < rounds; ++i) {
        auto damaged = bytes;
        if (i % 3 == 0) {
          damaged.resize(static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(bytes.size()))));
        } else {
          for (int flips = 0; flips < 1 + i % 4; ++flips) {
            damaged[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(damaged.size())))] ^=
                static_cast<std::uint8_t>(1 + rng.below(255));
          }
        }
        fc::test::write_bytes(file, damaged);
        const bool was_refused = read_every_way(file);
        (was_refused ? refused : read) += 1;
        if (i % 3 == 0) {
          ++truncated;
          truncated_refused += was_refused;
        }
      }
      if (fs::path(base).extension() == ".h5") {
        for (const std::string& dataset : fc::test::hdf5_datasets(base)) {
          fc::test::delete_object_copy(base, file, dataset);
          (read_every_way(file) ? refused : read) += 1;
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "fc_fuzz_readers: a reader threw something other than fc::Error: " << e.what() << "\n";
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  std::cout << "fc_fuzz_readers: " << refused + read << " damaged files, " << refused << " refused with fc::Error, "
            << read << " read; " << truncated_refused << " of " << truncated << " truncated files refused\n";
  if (truncated == 0 || truncated_refused < truncated) {
    std::cerr << "fc_fuzz_readers: a truncated file was read as if whole\n";
    return 1;
  }
  return 0;
}

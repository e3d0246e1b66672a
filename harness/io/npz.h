#pragma once
// NumPy .npy / .npz files: what a Python script dumps with np.savez or np.savez_compressed
// (inputs, captured intermediates), read into host tensors; and an uncompressed writer for
// tests and tools. Reading is hardened against damaged files: every problem is an fc::Error
// "PATH: what" on one line (for an array, "PATH: NAME.npy: what").
#include <map>
#include <string>

#include "core/tensor.h"
#include "harness/io/npy.h"  // NpyArray, parse_npy

namespace fc {

// Every array of a NumPy .npz archive, keyed by name without ".npy".
std::map<std::string, NpyArray> read_npz(const std::string& path);

// Write an uncompressed .npz (for tests and tools): numeric/bool tensors only.
// bf16 tensors are written as '<u2' (NumPy has no bfloat16) and so read back as u16.
void write_npz(const std::string& path, const std::map<std::string, HostTensor>& arrays);

}  // namespace fc

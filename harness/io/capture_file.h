#pragma once
// What someone's attention kernel produced, read from a file for `flashcore-check check`
// (and `triage`, which judges an output it finds beside the inputs). docs/check.md.
//   .npz  the SDPA report's arrays (q, k, v, attn_mask, scale, is_causal, dtype) and any of
//         out [B,H,Sq,D], lse [B,H,Sq], scores and probs [B,H,Sq,Sk], row_max and row_sum
//         [B,H,Sq], partial_out [B,H,T,Sq,D] and partial_lse [B,H,T,Sq] (T splits), with the
//         notes impl (a name) and tile_width (of the splits); bfloat16 as uint16 with
//         dtype = "bfloat16", as the inputs.
//   .h5   our schema (docs/snapshot-format.md) with the same tensors under /outputs and the
//         notes as attributes of /outputs.
// A file may hold the outputs alone (no q): the outputs of the inputs file before it.
#include <map>
#include <optional>
#include <string>

#include "harness/io/case_loader.h"

namespace fc {

struct CaptureFile {
  std::string path;
  std::optional<LoadedCase> inputs;           // when the file holds q
  std::map<std::string, HostTensor> outputs;  // by name: out, lse, scores, ...
  std::string impl;                           // the kernel's name, when the file gives one
  std::int64_t tile_width = 0;                // of the splits, when partials are given
};

// Every problem (not npz or HDF5, a damaged file, an unknown array, a tensor of a dtype
// other than fp16, bf16 or fp32) is one fc::Error naming the file.
CaptureFile read_capture_file(const std::string& path);

// Whether the file holds q (inputs), read from the archive's directory or the HDF5 tree.
bool capture_holds_inputs(const std::string& path);

// The output names a capture may hold, in the order a kernel produces them.
const std::vector<std::string>& capture_output_names();

}  // namespace fc

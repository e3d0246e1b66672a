#pragma once
// `flashcore-check reference`, streamed: every reference tensor of compute_reference
// (reference/attention.h) written into the HDF5 file block of query rows by block, so that no
// tensor of a whole head is ever held (rows of attention are independent). The file is the
// one write_reference writes (the same datasets, dtypes, shapes and attributes).
#include <vector>

#include "harness/inputs.h"
#include "harness/io/h5_file.h"
#include "reference/attention.h"

namespace fc {

// Writes /reference/... and returns the fully masked rows (that exist). `budget_bytes`: what
// the blocks in flight may hold together.
// The bytes of every FP64 dataset write_reference_streamed writes for this shape and options.
double streamed_reference_bytes(const Shape& shape, const ReferenceOptions& options);

std::vector<MaskedRow> write_reference_streamed(H5Writer& out, const AttentionInputs& in, const ReferenceOptions& options,
                                                std::int64_t budget_bytes = std::int64_t{256} << 20);

}  // namespace fc

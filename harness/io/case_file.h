#pragma once
// The project's one HDF5 schema (docs/snapshot-format.md), version 2: the file header and
// /meta, the case's inputs, and reference tensors. Snapshots and fixtures add their groups
// on top (harness/io/snapshot.h).
#include <string>

#include "harness/io/h5_file.h"
#include "reference/attention.h"
#include "reports/case_result.h"

namespace fc {

// 2: GQA, softcap, window, ALiBi, varlen and paged KV (files of version 1 read as before).
inline constexpr std::int64_t kSchemaVersion = 2;

// "/" attributes (schema, schema_version, kind) and /meta (tool, device, case).
void write_header(H5Writer& out, const std::string& kind, const std::string& command,
                  const CaseDescription& description, const AttentionInputs& inputs);
// /inputs/q, k, v, the mask parts and the layout (sequence lengths, block table).
void write_inputs(H5Writer& out, const AttentionInputs& inputs);
// /reference/full, and /reference/paged, /reference/split when computed.
void write_reference(H5Writer& out, const ReferenceTensors& reference, const ReferenceOptions& options);
// /reference/full/masked_rows and the attributes of /reference/paged and /reference/split,
// after their datasets (write_reference ends with it; the streamed reference too).
void write_reference_extras(H5Writer& out, const std::vector<MaskedRow>& masked_rows, const ReferenceOptions& options);

struct CaseFile {
  std::string kind;
  CaseDescription description;
  AttentionInputs inputs;
};
// Reads and checks the header, /meta and /inputs: a file of another schema or a newer
// version, a missing dataset, a wrong dtype or rank, a shape disagreeing with /meta are
// each one fc::Error naming the file.
CaseFile read_case_file(const H5Reader& in);

std::string utc_time_now();  // "2026-11-23T10:16:00Z"

}  // namespace fc

#pragma once
// A MatmulRecord and its lint findings as JSON. Field names are snake_case and stable; a field
// whose Get failed is null, and the failure is listed under "failed_gets". Enum values are
// written by name (lt_names.h), statuses as {"code": 7, "name": "CUBLAS_STATUS_INVALID_VALUE"}.
//
//   record:   name, desc, layouts {a, b, c, d}, preference, algo (or null), heuristic (or null),
//             sets[], failed_gets[]
//   desc:     compute_type, scale_type, transa, transb, epilogue, pointer_mode
//   layout:   type, order, rows, cols, ld, batch_count, strided_batch_offset
//   preference: max_workspace_bytes
//   algo:     id, tile_id, stages_id, splitk_num, reduction_scheme, cta_swizzling, custom_option
//   heuristic: workspace_size, waves_count, state
//   sets[]:   object, attribute, value, size, expected_type, expected_size, status
//   failed_gets[]: object, attribute, status
//   findings[]: rule, operand, message
#include <vector>

#include "core/json.h"
#include "stages/cublaslt/descriptor_record.h"
#include "stages/cublaslt/lint.h"

namespace fc {

Json record_json(const MatmulRecord& record);
Json findings_json(const std::vector<LintFinding>& findings);

}  // namespace fc

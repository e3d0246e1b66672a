#pragma once
// Checks run on the CPU before a cuBLASLt matmul is launched, over what cuBLASLt really holds
// (a MatmulRecord read back after every Set) and what the harness allocated. Each finding
// carries a stable rule id:
//
//   set-status          a logged Set, or a Get of the record, returned a status other than
//                       CUBLAS_STATUS_SUCCESS (the attribute kept its previous value)
//   out-of-bounds       the elements a layout addresses (rows, cols, ld, order, batch count,
//                       strided batch offset) reach before the buffer or past its last element
//   ld-too-small        ld is smaller than the leading extent (rows for COL, cols for ROW)
//   dtype-mismatch      a layout's type is not its buffer's dtype, or D's type is not the
//                       dtype the next stage reads D as
//   beta-uninitialized  beta != 0 while C's buffer was not written before the matmul
//   scale-type          the scale type is not one cuBLASLt documents for the compute type
//                       (lt_types.h has the table)
//
// Geometry rules check COL and ROW orders only; a layout whose needed Get failed is skipped by
// the rules that need it (set-status already reports it).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "stages/cublaslt/descriptor_record.h"

namespace fc {

namespace lint_rule {
inline constexpr const char* set_status = "set-status";
inline constexpr const char* out_of_bounds = "out-of-bounds";
inline constexpr const char* ld_too_small = "ld-too-small";
inline constexpr const char* dtype_mismatch = "dtype-mismatch";
inline constexpr const char* beta_uninitialized = "beta-uninitialized";
inline constexpr const char* scale_type = "scale-type";
inline constexpr const char* shape_mismatch = "shape-mismatch";
}  // namespace lint_rule

// What the harness allocated for one of A, B, C, D.
struct OperandBuffer {
  std::string name;  // the harness's name for it: "Q", "K", "scores"
  DType dtype = DType::f32;
  std::int64_t elements = 0;
  bool written_before = true;  // holds data when the matmul starts
};

struct LintContext {
  OperandBuffer a, b, c, d;
  std::optional<DType> next_stage_reads;  // dtype the next stage reads D as
  double beta = 0;
};

struct LintFinding {
  std::string rule;     // a lint_rule id
  std::string operand;  // "A".."D", "desc", "preference", "algo"
  std::string message;
};

std::vector<LintFinding> lint(const MatmulRecord& record, const LintContext& context);

}  // namespace fc

#include "stages/cublaslt/lint.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "stages/cublaslt/lt_names.h"
#include "stages/cublaslt/lt_types.h"

namespace fc {
namespace {

// rows·ld + batch·stride can pass 2^63 for a corrupted layout; 128 bits hold any of them.
using Wide = __int128;

std::string wide_text(Wide v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  for (; v != 0; v /= 10) digits.insert(digits.begin(), static_cast<char>('0' + (negative ? -(v % 10) : v % 10)));
  return negative ? "-" + digits : digits;
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string status_text(cublasStatus_t status) {
  return std::to_string(static_cast<int>(status)) + " (" + status_name(status) + ")";
}

std::string buffer_text(const OperandBuffer& buffer) {
  return (buffer.name.empty() ? "its buffer" : "buffer " + buffer.name) + " (" +
         std::to_string(buffer.elements) + " " + dtype_name(buffer.dtype) + " elements)";
}

void check_statuses(const MatmulRecord& r, std::vector<LintFinding>& out) {
  for (const SetEntry& e : r.sets) {
    if (e.ok()) continue;
    std::string message = e.name() + " set from " + std::to_string(e.size) + " bytes, status " + status_text(e.status);
    if (e.size != attribute_type_size(e.expected)) {
      message += std::string("; ") + attribute_type_name(e.expected) + " expected";
    } else {
      message += std::string("; the size matches its type ") + attribute_type_name(e.expected) + ", the value was refused";
    }
    out.push_back({lint_rule::set_status, e.operand, message});
  }
  for (const FailedRead& f : failed_reads(r)) {
    out.push_back({lint_rule::set_status, f.operand, f.name() + " read back failed, status " + status_text(f.status)});
  }
}

bool geometry_known(const LayoutRecord& l) {
  return l.order.ok() && l.rows.ok() && l.cols.ok() && l.ld.ok() && l.batch_count.ok() &&
         l.strided_batch_offset.ok() &&
         (l.order.value == CUBLASLT_ORDER_COL || l.order.value == CUBLASLT_ORDER_ROW);
}

// The leading extent: consecutive elements of a column (COL) or of a row (ROW).
std::uint64_t leading_extent(const LayoutRecord& l) {
  return l.order.value == CUBLASLT_ORDER_COL ? l.rows.value : l.cols.value;
}

std::string geometry_text(const LayoutRecord& l) {
  return "rows " + std::to_string(l.rows.value) + " cols " + std::to_string(l.cols.value) + " ld " +
         std::to_string(l.ld.value) + " " + order_name(l.order.value) + " batch " +
         std::to_string(l.batch_count.value) + " stride " + std::to_string(l.strided_batch_offset.value);
}

void check_ld(const LayoutRecord& l, std::vector<LintFinding>& out) {
  if (!geometry_known(l)) return;
  const std::uint64_t leading = leading_extent(l);
  if (l.ld.value >= 0 && static_cast<std::uint64_t>(l.ld.value) >= leading) return;
  const bool col = l.order.value == CUBLASLT_ORDER_COL;
  out.push_back({lint_rule::ld_too_small, l.operand,
                 l.operand + ": ld " + std::to_string(l.ld.value) + " < " + (col ? "rows " : "cols ") +
                     std::to_string(leading) + " (" + order_name(l.order.value) + " order: " +
                     (col ? "columns" : "rows") + " overlap)"});
}

void check_bounds(const LayoutRecord& l, const OperandBuffer& buffer, std::vector<LintFinding>& out) {
  if (!geometry_known(l) || l.rows.value == 0 || l.cols.value == 0 || l.batch_count.value <= 0) return;
  const bool col = l.order.value == CUBLASLT_ORDER_COL;
  const Wide lines = static_cast<Wide>(col ? l.cols.value : l.rows.value);  // columns (COL) or rows (ROW)
  const Wide ld = l.ld.value;
  const Wide last_line_start = (lines - 1) * ld;
  const Wide batch_start = static_cast<Wide>(l.batch_count.value - 1) * l.strided_batch_offset.value;
  const Wide first = std::min<Wide>(0, last_line_start) + std::min<Wide>(0, batch_start);
  const Wide last = std::max<Wide>(0, last_line_start) + static_cast<Wide>(leading_extent(l)) - 1 +
                    std::max<Wide>(0, batch_start);
  if (first >= 0 && last < buffer.elements) return;
  std::string message = l.operand + ": " + geometry_text(l) + " addresses elements " + wide_text(first) + ".." +
                        wide_text(last) + " of " + buffer_text(buffer);
  message += first < 0 ? ", before its start" : ", past its end";
  out.push_back({lint_rule::out_of_bounds, l.operand, message});
}

void check_dtype(const LayoutRecord& l, const OperandBuffer& buffer, std::vector<LintFinding>& out) {
  if (!l.type.ok()) return;
  const std::optional<cudaDataType_t> expected = cuda_data_type(buffer.dtype);
  if (expected == l.type.value) return;
  std::string message = l.operand + ": layout type " + data_type_name(l.type.value) + " but " + buffer_text(buffer);
  message += expected ? " holds " + data_type_name(*expected) : ", a dtype cuBLASLt has no matrix type for";
  out.push_back({lint_rule::dtype_mismatch, l.operand, message});
}

void check_next_stage(const LayoutRecord& d, std::optional<DType> next_stage_reads, std::vector<LintFinding>& out) {
  if (!next_stage_reads || !d.type.ok()) return;
  const std::optional<cudaDataType_t> read_as = cuda_data_type(*next_stage_reads);
  if (read_as == d.type.value) return;
  out.push_back({lint_rule::dtype_mismatch, d.operand,
                 d.operand + ": written as " + data_type_name(d.type.value) + " but the next stage reads it as " +
                     dtype_name(*next_stage_reads)});
}

void check_beta(const LintContext& context, std::vector<LintFinding>& out) {
  if (context.beta == 0 || context.c.written_before) return;
  out.push_back({lint_rule::beta_uninitialized, "C",
                 "C: beta = " + number_text(context.beta) + " reads " + buffer_text(context.c) +
                     ", which nothing wrote before this matmul"});
}

void check_scale_type(const MatmulDescRecord& m, std::vector<LintFinding>& out) {
  if (!m.compute_type.ok() || !m.scale_type.ok()) return;
  const std::vector<cudaDataType_t> accepted = documented_scale_types(m.compute_type.value);
  if (std::find(accepted.begin(), accepted.end(), m.scale_type.value) != accepted.end()) return;
  std::string message = "compute type " + compute_type_name(m.compute_type.value);
  if (accepted.empty()) {
    message += " has no documented scale type; scale type is " + data_type_name(m.scale_type.value);
  } else {
    message += " takes scale type ";
    for (std::size_t i = 0; i < accepted.size(); ++i) message += (i ? " or " : "") + data_type_name(accepted[i]);
    message += ", not " + data_type_name(m.scale_type.value);
  }
  out.push_back({lint_rule::scale_type, "desc", message});
}

// op(A) is m x k and op(B) k x n, C and D m x n: what cuBLASLt rejects with a bare
// CUBLAS_STATUS_INVALID_VALUE, said here with the dims (or, where m, n and k happen to agree,
// would compute on the wrong elements: a K built with rows and cols exchanged).
void check_shapes(const MatmulRecord& r, std::vector<LintFinding>& out) {
  const MatmulDescRecord& d = r.desc;
  if (!d.transa.ok() || !d.transb.ok()) return;
  for (const LayoutRecord* l : {&r.a, &r.b, &r.c, &r.d}) {
    if (!geometry_known(*l)) return;
  }
  auto op = [](const LayoutRecord& l, cublasOperation_t t) {
    return t == CUBLAS_OP_N ? std::make_pair(l.rows.value, l.cols.value) : std::make_pair(l.cols.value, l.rows.value);
  };
  const auto [m, k] = op(r.a, d.transa.value);
  const auto [k_b, n] = op(r.b, d.transb.value);
  auto dims = [](std::uint64_t rows, std::uint64_t cols) { return std::to_string(rows) + " x " + std::to_string(cols); };
  if (k != k_b) {
    out.push_back({lint_rule::shape_mismatch, "A",
                   "op(A) is " + dims(m, k) + " and op(B) " + dims(k_b, n) + ": their inner dims differ"});
    return;
  }
  for (const LayoutRecord* l : {&r.c, &r.d}) {
    if (l->rows.value == m && l->cols.value == n) continue;
    out.push_back({lint_rule::shape_mismatch, l->operand,
                   l->operand + " is " + dims(l->rows.value, l->cols.value) + ", op(A) op(B) is " + dims(m, n)});
  }
}

}  // namespace

std::vector<LintFinding> lint(const MatmulRecord& record, const LintContext& context) {
  std::vector<LintFinding> findings;
  check_statuses(record, findings);
  const std::pair<const LayoutRecord*, const OperandBuffer*> operands[] = {
      {&record.a, &context.a}, {&record.b, &context.b}, {&record.c, &context.c}, {&record.d, &context.d}};
  for (const auto& [layout, buffer] : operands) {
    check_ld(*layout, findings);
    check_bounds(*layout, *buffer, findings);
    check_dtype(*layout, *buffer, findings);
  }
  check_shapes(record, findings);
  check_next_stage(record.d, context.next_stage_reads, findings);
  check_beta(context, findings);
  check_scale_type(record.desc, findings);
  return findings;
}

}  // namespace fc

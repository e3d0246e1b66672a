#pragma once
// The terminal report of one case: a table of the stage outputs in execution order and,
// under it, the pinpoint of the first divergence and, when profiled, the evaluation's steps. `colour`: verdict words in colour.
#include <ostream>

#include "reports/case_result.h"

namespace fc {

void write_case_table(std::ostream& out, const CaseResult& result, bool colour = false);
void write_pinpoint(std::ostream& out, const Divergence& d);
// The evaluation's seconds by step, when it was profiled (--profile-evaluation).
void write_evaluation_steps(std::ostream& out, const CaseResult& result);
std::string index_string(const Index4& i);  // "(1,0,200,3)", col "-" for row quantities
// The first bad element of a failing output as the table prints it ("-" when it passes).
std::string first_bad_text(const OutputResult& r);
// "diverged at softmax (1,0,200,3) (fully-masked-row)", and the reason if there is one.
std::string outcome_text(const CaseResult& result);

}  // namespace fc

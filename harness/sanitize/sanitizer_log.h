#pragma once
// What compute-sanitizer wrote to its --log-file, read back: every record ("=========" and a
// message, then indented lines) grouped by what it says and where, and the tool's summary
// counts. The record formats of memcheck, racecheck, synccheck and initcheck differ; what is
// read is what they share: a record's first line is its message, "at FUNCTION+0xOFFSET"
// names the device function of the access (with line info, the function inlined there, such
// as a copy helper, rather than the kernel), "in FILE:LINE" the source line, "[N hazards]"
// what a racecheck record stands for.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace fc {

struct SanitizerFinding {
  std::string severity;       // "error" or "warning"
  std::string message;        // the record's message without "Error: " and its "at FUNCTION+0x..." parts
  std::string function;       // the first device function it names, without "void" and parameters; "" if none
  std::string where;          // the source lines it names (FILE:LINE, comma-separated); "" if none
  std::int64_t records = 0;   // records of this message, function and place
  std::int64_t hazards = 0;   // racecheck: the hazards they stand for; else 0
  std::string first_record;   // the first of them, each line without the tool's "=========" and indent, joined by "\n"
};

struct SanitizerReport {
  std::string tool;
  std::int64_t errors = 0, warnings = 0;  // the tool's summary line's, else the records counted
  bool summary_seen = false;              // a summary line was read (the tool finished its report)
  std::vector<SanitizerFinding> findings;  // in the order first met
  std::vector<std::string> process_messages;  // what it says about the process ("process didn't terminate
                                              // successfully"): the run did not end normally
};

SanitizerReport parse_sanitizer_log(std::istream& log, const std::string& tool);

// "void ns::kernel<T, (bool)1>(Params, int)" -> "ns::kernel<T, (bool)1>".
std::string short_kernel_name(const std::string& function);

}  // namespace fc

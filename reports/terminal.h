#pragma once
// What the command's own output looks like on a terminal: verdict words in colour when
// stdout is a terminal and NO_COLOR (https://no-color.org) is unset or empty; and --quiet,
// which leaves only the summary line.
#include <ostream>
#include <string>

namespace fc {

enum class Tone { good, bad, warn };

// The rule, given the facts (tested directly): a terminal and no NO_COLOR.
bool colour_wanted(bool stdout_is_terminal, const char* no_color);
// The rule applied to this process: isatty(1) and getenv("NO_COLOR").
bool colour_stdout();

// `text` in the tone's colour when `colour`, else as it is.
std::string painted(const std::string& text, Tone tone, bool colour);
// A verdict word ("pass", "FAIL", "diverged", "error", "skipped", "ok", ...) painted by its meaning.
std::string painted_verdict(const std::string& word, bool colour);

// Where a command writes everything but its summary line: std::cout, or nowhere under --quiet.
std::ostream& detail_stream(bool quiet);

}  // namespace fc

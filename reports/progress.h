#pragma once
// Progress of long work on stderr, only when stderr is a terminal:
//   "fixtures: 12/34, 0:07 elapsed, ETA 0:13"
// redrawn in place at most ten times a second and cleared when done. Written to a file, a
// pipe or CI's log, it writes nothing.
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace fc {

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds since a fixed point

  // On stderr, shown when stderr is a terminal.
  Progress(std::string what, std::int64_t total);
  // On `out`, shown when `shown`, timed by `clock` (tests).
  Progress(std::string what, std::int64_t total, std::ostream& out, bool shown, Clock clock);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add_total(std::int64_t n);      // work that became known later
  void advance(std::int64_t n = 1);    // n more done; redraws
  void clear();                        // before other output reaches the terminal
  std::string line() const;            // the text drawn, without terminal controls
  bool shown() const { return shown_; }

 private:
  void draw(bool force);

  std::string what_;
  std::int64_t total_ = 0, done_ = 0;
  std::ostream& out_;
  bool shown_ = false, drawn_ = false;
  Clock clock_;
  double start_ = 0, last_draw_ = -1;
};

// "0:07", "12:05", "1:02:03".
std::string duration_text(double seconds);

}  // namespace fc

#pragma once
// Calls into a plugin that cannot take the harness down: a fatal signal raised inside the
// call (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, e.g. an exception thrown through the C
// boundary ending in std::terminate) or a C++ exception escaping it becomes a PluginFailure
// naming the plugin and the call. The command then ends with that one line and exit 2;
// unwinding removes any staged output file (harness/io/staged_file.h).
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace fc {

// Not an fc::Error on purpose: a judged run catches those as a failed case, but after a
// plugin crashed or failed the process must not go on judging.
class PluginFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs fn(arg) under the guard; `who` and `call` name it in the failure ("plugin
// libx.so: run"). fn must only call into the plugin: C++ objects it creates are not
// destroyed when a signal ends it.
void guarded_call(const std::string& who, const char* call, void (*fn)(void*), void* arg);

// A failure no caller can be told of when it happens (a plugin's destroy, called from a
// destructor): kept, and the command ends with it after its results (run_cli), one line and
// exit 2. The first is kept.
void keep_late_failure(const std::string& what);
std::optional<std::string> late_failure();

template <class F>
void guarded(const std::string& who, const char* call, F&& f) {
  using Fn = std::remove_reference_t<F>;
  guarded_call(who, call, [](void* p) { (*static_cast<Fn*>(p))(); }, const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace fc

#include "harness/plugin/crash_guard.h"

#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <vector>

namespace fc {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

thread_local sigjmp_buf* t_target = nullptr;
thread_local volatile sig_atomic_t t_signal = 0;

void on_fatal_signal(int sig, siginfo_t*, void*) {
  if (t_target) {
    t_signal = sig;
    siglongjmp(*t_target, 1);
  }
  // Not inside a plugin call: what the signal would have done without us.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Once per process, when the first guarded call is made: the handlers, and a stack of
// their own so that a plugin's stack overflow can be reported too.
void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    static std::vector<char> alt_stack(1 << 16);
    stack_t ss{};
    ss.ss_sp = alt_stack.data();
    ss.ss_size = alt_stack.size();
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int sig : kSignals) sigaction(sig, &sa, nullptr);
  });
}

const char* signal_text(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV, a bad memory access";
    case SIGBUS: return "SIGBUS, a bad memory access";
    case SIGFPE: return "SIGFPE, an arithmetic trap";
    case SIGILL: return "SIGILL, an illegal instruction";
    case SIGABRT: return "SIGABRT: it aborted (an exception thrown through the C boundary ends so)";
  }
  return "a fatal signal";
}

std::mutex late_mutex;
std::optional<std::string> late;  // keep_late_failure's

}  // namespace

void keep_late_failure(const std::string& what) {
  const std::lock_guard<std::mutex> lock(late_mutex);
  if (!late) late = what;
}

std::optional<std::string> late_failure() {
  const std::lock_guard<std::mutex> lock(late_mutex);
  return late;
}

void guarded_call(const std::string& who, const char* call, void (*fn)(void*), void* arg) {
  install_handlers();
  sigjmp_buf target;
  sigjmp_buf* const outer = t_target;  // a guarded call inside another (a tap callback) nests
  if (sigsetjmp(target, 1) != 0) {
    t_target = outer;
    throw PluginFailure(who + ": " + call + " crashed with " + signal_text(t_signal));
  }
  t_target = &target;
  try {
    fn(arg);
  } catch (const std::exception& e) {
    t_target = outer;
    throw PluginFailure(who + ": " + call + " threw an exception: " + e.what());
  } catch (...) {
    t_target = outer;
    throw PluginFailure(who + ": " + call + " threw an exception");
  }
  t_target = outer;
}

}  // namespace fc

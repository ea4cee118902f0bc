// kernels/cpu/op_profile.cpp — see kernels/op_profile.h.
#include "kernels/op_profile.h"

#include <atomic>
#include <mutex>
#include <utility>

namespace bareyolo::op_profile {

namespace {

std::atomic<bool> g_enabled{false};
std::mutex g_mutex;  // guards g_totals
std::map<std::string, Totals> g_totals;
thread_local int tls_depth = 0;  // op timers open on this thread

}  // namespace

void enable(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

std::map<std::string, Totals> take() {
  std::lock_guard lock(g_mutex);
  return std::exchange(g_totals, {});
}

Timer::Timer(const char* op) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  if (tls_depth++ > 0) {
    nested_ = true;
    return;
  }
  op_ = op;
  start_ = std::chrono::steady_clock::now();
}

Timer::~Timer() {
  if (nested_) --tls_depth;
  if (!op_) return;
  --tls_depth;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::lock_guard lock(g_mutex);
  Totals& totals = g_totals[op_];
  totals.calls += 1;
  totals.seconds += seconds;
}

}  // namespace bareyolo::op_profile

// kernels/cpu/op_profile.cpp — see kernels/op_profile.h.
#include "kernels/op_profile.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

namespace bareyolo::op_profile {

namespace {

std::atomic<bool> g_enabled{false};
std::mutex g_mutex;  // guards g_totals
std::map<std::string, Totals> g_totals;
thread_local int tls_depth = 0;  // op timers open on this thread
// add_pool_loop's sums, for the outermost timer open on this thread.
thread_local double tls_pool_loop = 0, tls_pool_wait = 0;

}  // namespace

void enable(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void add_pool_loop(double wall_seconds, double wait_thread_seconds) {
  tls_pool_loop += wall_seconds;
  tls_pool_wait += wait_thread_seconds;
}

double idle_share(const Totals& totals, int threads) {
  if (totals.seconds <= 0) return 0;
  const double outside_loops = std::max(0.0, totals.seconds - totals.pool_loop_seconds);
  return (totals.pool_wait_seconds + (threads - 1) * outside_loops) / (threads * totals.seconds);
}

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
  tls_pool_loop = tls_pool_wait = 0;
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
  totals.pool_loop_seconds += tls_pool_loop;
  totals.pool_wait_seconds += tls_pool_wait;
}

}  // namespace bareyolo::op_profile

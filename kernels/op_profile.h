// kernels/op_profile.h — where a step's CPU time goes, op by op (bench_model's profile).
//
// Every op of kernels/ops.h, and the detection and loss ops in models/, routes through one of
// kernels/route.h's macros, and the macro also opens an op_profile::Timer for the CPU path:
// while profiling is on, each CPU op's wall time on its calling thread (which includes the
// pool threads' share of it) is summed under the op's name. An op that calls another op
// (batchnorm_forward_train runs the two phases) counts once, as the outer one. Off, a timer
// costs one relaxed atomic load.
//
// Beside it, the thread pool reports (add_pool_loop) the wall time of the op's parallel loops
// and how long its threads waited in them: a loop of W seconds on T threads offers T * W
// thread-seconds, and those not spent running chunks went to waking up, claiming, or waiting
// for the slowest thread's last chunk. Outside its loops an op runs on one thread while the
// others wait. Both together (idle_share) split what an op loses to a second thread into
// waiting (uneven or serial work) and slower work (threads contending for caches and memory).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace bareyolo::op_profile {

struct Totals {
  int64_t calls = 0;
  double seconds = 0;
  double pool_loop_seconds = 0;  // wall time of its parallel loops on the thread pool
  double pool_wait_seconds = 0;  // thread-seconds the pool's threads waited in those loops
};

// The share of `threads` threads' time in an op (totals recorded at that thread count) that
// no thread spent on its work: waits inside its parallel loops, and every other thread's
// time while the op ran outside them.
double idle_share(const Totals& totals, int threads);

void enable(bool on);
bool enabled();
// Adds a parallel loop to the op open on this thread (the outermost timer): called by the
// thread pool after each loop while profiling is on.
void add_pool_loop(double wall_seconds, double wait_thread_seconds);
// What was recorded since the last take(), by op name; clears it.
std::map<std::string, Totals> take();

class Timer {
 public:
  explicit Timer(const char* op);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

 private:
  const char* op_ = nullptr;  // set when this timer records (profiling on, outermost op)
  bool nested_ = false;       // inside another op's timer: counts the depth only
  std::chrono::steady_clock::time_point start_;
};

}  // namespace bareyolo::op_profile

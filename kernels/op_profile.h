// kernels/op_profile.h — where a step's CPU time goes, op by op (bench_model's profile).
//
// Every op of kernels/ops.h, and the detection and loss ops in models/, routes through one of
// kernels/route.h's macros, and the macro also opens an op_profile::Timer for the CPU path:
// while profiling is on, each CPU op's wall time on its calling thread (which includes the
// pool threads' share of it) is summed under the op's name. An op that calls another op
// (batchnorm_forward_train runs the two phases) counts once, as the outer one. Off, a timer
// costs one relaxed atomic load.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace bareyolo::op_profile {

struct Totals {
  int64_t calls = 0;
  double seconds = 0;
};

void enable(bool on);
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

// data/stage_clock.cpp — see stage_clock.h.
#include "data/stage_clock.h"

#include <atomic>
#include <ctime>

namespace bareyolo::data {

namespace {

std::atomic<bool> clock_on{false};
std::array<std::atomic<int64_t>, kStageCount> stage_ns{};

int64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

}  // namespace

const char* stage_name(Stage stage) {
  static const char* const kNames[kStageCount] = {"decode", "resize", "place",
                                                  "warp",   "hsv",    "batch"};
  return kNames[size_t(stage)];
}

void run_stage_clock(bool on) {
  for (std::atomic<int64_t>& total : stage_ns) total.store(0, std::memory_order_relaxed);
  clock_on.store(on, std::memory_order_relaxed);
}

StageSeconds stage_seconds() {
  StageSeconds totals;
  for (int s = 0; s < kStageCount; ++s)
    totals.seconds[size_t(s)] = double(stage_ns[size_t(s)].load(std::memory_order_relaxed)) * 1e-9;
  return totals;
}

StageTimer::StageTimer(Stage stage) : stage_(stage) {
  if (clock_on.load(std::memory_order_relaxed)) start_ns_ = thread_cpu_ns();
}

StageTimer::~StageTimer() {
  if (start_ns_ >= 0)
    stage_ns[size_t(stage_)].fetch_add(thread_cpu_ns() - start_ns_, std::memory_order_relaxed);
}

}  // namespace bareyolo::data

// engine/distributed/comm/periodic_thread.h — a thread that calls `tick` at once and then every
// `period` until it is destroyed; destruction wakes it from its sleep, so it never holds up the
// end of a run by a period. The heartbeat and rank 0's stall watch run on one each.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace bareyolo::dist {

class PeriodicThread {
 public:
  PeriodicThread(std::chrono::milliseconds period, std::function<void()> tick);
  ~PeriodicThread();  // stops it after the tick in progress, if any, and joins it
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

 private:
  void run();

  const std::chrono::milliseconds period_;
  const std::function<void()> tick_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace bareyolo::dist

// engine/distributed/comm/periodic_thread.cpp — see periodic_thread.h.
#include "engine/distributed/comm/periodic_thread.h"

namespace bareyolo::dist {

PeriodicThread::PeriodicThread(std::chrono::milliseconds period, std::function<void()> tick)
    : period_(period), tick_(std::move(tick)), thread_([this] { run(); }) {}

PeriodicThread::~PeriodicThread() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PeriodicThread::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    tick_();
    lock.lock();
    wake_.wait_for(lock, period_, [this] { return stop_; });
  }
}

}  // namespace bareyolo::dist

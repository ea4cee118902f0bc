// models/train/background_writer.cpp — see background_writer.h.
#include "models/train/background_writer.h"

namespace bareyolo::models {

BackgroundWriter::BackgroundWriter(size_t max_queued)
    : max_queued_(max_queued), thread_([this] { run(); }) {}

BackgroundWriter::~BackgroundWriter() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundWriter::queue(Write write) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queued_.size() < max_queued_; });
  if (failure_) return;
  queued_.push_back(std::move(write));
  changed_.notify_all();
}

void BackgroundWriter::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queued_.empty(); });
}

BackgroundWriter::Finished BackgroundWriter::take_finished() {
  const std::lock_guard<std::mutex> lock(mutex_);
  Finished finished{std::move(written_), failure_};
  written_.clear();
  return finished;
}

void BackgroundWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !queued_.empty() || stopping_; });
    if (queued_.empty()) return;  // stopping, with every queued write done
    // The write runs while it is still queued_.front(), so it counts against max_queued_;
    // queue()'s push_back meanwhile leaves references to a deque's elements valid.
    const Write& write = queued_.front();
    std::vector<std::string> written;
    std::exception_ptr failure;
    lock.unlock();
    try {
      write(written);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    written_.insert(written_.end(), written.begin(), written.end());
    queued_.pop_front();
    if (failure) {
      failure_ = failure;
      queued_.clear();
    }
    changed_.notify_all();
  }
}

}  // namespace bareyolo::models

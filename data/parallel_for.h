// data/parallel_for.h — a pass over n independent items on several threads (verification,
// building the image cache): items are handed out one at a time, so slow images balance. Each
// item counts as the rank's progress (progress_board.h): caching a large dataset can take
// minutes, and the stall watch must not take it for a hang.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/distributed/comm/progress_board.h"

namespace bareyolo::data {

// Calls work(i) for every i in [0, n) on `threads` threads (<= 0: one per core), the calling
// thread among them. The first exception is rethrown after all threads have stopped.
template <class Work>
void parallel_for(size_t n, int threads, const Work& work) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto run = [&] {
    try {
      for (size_t i = next++; i < n; i = next++) {
        work(i);
        dist::note_progress();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = n;  // the others stop at their next item
    }
  };
  int count = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  count = std::min<int>(count, int(std::max<size_t>(n, 1)));
  std::vector<std::thread> workers;
  for (int t = 1; t < count; ++t) workers.emplace_back(run);
  run();
  for (std::thread& worker : workers) worker.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace bareyolo::data

// data/host_buffer_pool.h — the free list behind allocate_host_buffer's pinned buffers
// (host_buffer.h), apart from CUDA so that its rules are testable without a GPU:
//
//   1. a buffer handed back while a device copy may still read it is never handed out again
//      (to be overwritten by the next batch) before that copy has finished;
//   2. a request takes the smallest kept buffer that fits, preferring one no copy reads any
//      more to waiting for one: after validation's larger rectangular batches, training
//      batches reuse those buffers instead of pinning and freeing memory every step
//      (cudaHostAlloc maps pages, milliseconds; cudaFreeHost synchronises the device);
//   3. at most `max_buffers` buffers and `max_bytes` bytes are kept: keeping one more evicts
//      the oldest kept ones, which go back to the caller to be freed once their last read has
//      completed.
//
// Each kept buffer carries the Fence of its last device read (DeviceEvent, device_memory.h:
// `bool complete() const`, `void synchronize() const`, movable).
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace bareyolo::data {

template <class Fence>
class HostBufferPool {
 public:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
    Fence last_read;
  };
  struct Taken {
    void* data = nullptr;  // nullptr: nothing kept fits
    size_t bytes = 0;      // the buffer's own size, at least the size asked for
  };

  HostBufferPool(size_t max_buffers, size_t max_bytes)
      : max_buffers_(max_buffers), max_bytes_(max_bytes) {}

  // Keeps `buffer` for take(). Returns what the pool let go to stay within its bounds, oldest
  // first (`buffer` itself when it alone is larger than max_bytes): the caller frees each once
  // its last_read completes.
  std::vector<Buffer> keep(Buffer buffer) {
    std::vector<Buffer> evicted;
    std::lock_guard<std::mutex> lock(mutex_);
    if (buffer.bytes > max_bytes_) {
      evicted.push_back(std::move(buffer));
      return evicted;
    }
    kept_bytes_ += buffer.bytes;
    kept_.push_back(std::move(buffer));
    while (kept_.size() > max_buffers_ || kept_bytes_ > max_bytes_) {
      kept_bytes_ -= kept_.front().bytes;
      evicted.push_back(std::move(kept_.front()));
      kept_.pop_front();
    }
    return evicted;
  }

  // The smallest kept buffer of at least `bytes` that no device copy reads any more; when
  // every fitting one is still read, the smallest (the oldest of that size), once the host has
  // waited for its read.
  Taken take(size_t bytes) {
    std::optional<Buffer> chosen;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto best = kept_.end(), best_free = kept_.end();
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        if (it->bytes < bytes) continue;
        if (best == kept_.end() || it->bytes < best->bytes) best = it;
        if (it->last_read.complete() && (best_free == kept_.end() || it->bytes < best_free->bytes))
          best_free = it;
      }
      if (best_free != kept_.end()) best = best_free;
      if (best == kept_.end()) return {};
      chosen.emplace(std::move(*best));
      kept_bytes_ -= chosen->bytes;
      kept_.erase(best);
    }
    chosen->last_read.synchronize();  // outside the lock; returns at once when complete
    return {chosen->data, chosen->bytes};
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return kept_.size();
  }

 private:
  std::mutex mutex_;
  std::deque<Buffer> kept_;  // oldest first
  size_t kept_bytes_ = 0;
  const size_t max_buffers_, max_bytes_;
};

}  // namespace bareyolo::data

// data/host_buffer_pool.h — the free list behind allocate_host_buffer's pinned buffers
// (host_buffer.h), apart from CUDA so that its one rule is testable without a GPU:
//
//   a buffer handed back while a device copy may still read it is never handed out again
//   (to be overwritten by the next batch) before that copy has finished.
//
// Each kept buffer carries the Fence of its last device read (cuda::Event: `bool complete()
// const`, `void synchronize() const`, movable). take() prefers a buffer whose fence is
// complete; when all of that size are still being read it waits for the oldest, outside the
// lock, which is cheaper than pinning new memory (cudaHostAlloc maps pages, milliseconds).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace bareyolo::data {

template <class Fence>
class HostBufferPool {
 public:
  explicit HostBufferPool(size_t capacity) : capacity_(capacity) {}

  // Keeps `buffer` (`bytes` long) for take(). False when the pool holds `capacity` buffers
  // already: then nothing is moved from `last_read`, and the caller frees the buffer once
  // last_read completes.
  bool keep(void* buffer, size_t bytes, Fence&& last_read) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_.size() >= capacity_) return false;
    kept_.emplace(bytes, Kept{buffer, std::move(last_read)});
    return true;
  }

  // A kept buffer of exactly `bytes` that no device copy reads any more, or nullptr.
  void* take(size_t bytes) {
    std::optional<Kept> chosen;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto [first, last] = kept_.equal_range(bytes);
      if (first == last) return nullptr;
      auto it = std::find_if(first, last,
                             [](const auto& entry) { return entry.second.last_read.complete(); });
      if (it == last) it = first;  // equal keys keep insertion order: the oldest
      chosen.emplace(std::move(it->second));
      kept_.erase(it);
    }
    chosen->last_read.synchronize();  // returns at once when complete
    return chosen->buffer;
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return kept_.size();
  }

 private:
  struct Kept {
    void* buffer;
    Fence last_read;
  };
  std::mutex mutex_;
  std::multimap<size_t, Kept> kept_;  // bytes -> buffer
  const size_t capacity_;
};

}  // namespace bareyolo::data

// kernels/caching_allocator.h — the caching allocator behind every Tensor's memory, on a GPU
// (kernels/cuda/runtime/allocator.cu, backed by cudaMalloc/cudaFree) and on the host
// (kernels/cpu/device_memory.cpp, backed by the C library): a training step that repeats the
// same allocations never calls the backing allocator — on a GPU each cudaMalloc/cudaFree
// synchronises the device, on the host each large malloc maps fresh pages the step then faults
// in — and the step guard (kernels/step_guard.h) checks that it does not.
//
// Bookkeeping, free of CUDA so that a unit test drives it with a fake backing allocator
// (tests/unit/cuda_allocator_logic.cpp):
//  - a request is rounded up to its size class: 8 classes per power of two from 512 bytes
//    up (512, 576, 640, ..., 960, 1024, 1152, ...), so at most 1/8 of a block is slack;
//  - a freed block goes on the free list of (its stream, its class) and is handed out again
//    only for a request of the same class on the same stream, lowest address first: which
//    block a request gets depends on which blocks are free, not on the order they were freed
//    in, so a training step that frees everything it allocated gets the same addresses at
//    every repeat (what a CUDA graph of the step needs: kernels/op_sequence.h). Work on one stream
//    runs in issue order, so a block freed on the host while kernels that use it are still queued
//    is safe to give to the next kernel of that stream without any event;
//  - memory used on another stream must be ordered back onto the owning stream (an event)
//    by its user before it is freed;
//  - when the backing allocator runs out, every cached block is returned to it and the
//    request is tried once more before it fails with the statistics in the message;
//  - a backing that asks for it (the host's) keeps its reserve within twice the peak in use:
//    a miss that would take it further first gives every cached block back, so shapes that
//    change (multi-scale training, validation beside training) cannot grow the cache without
//    bound, while a step that repeats itself, which never misses, keeps its blocks.
//  - a pool is a tag of its own in place of a stream (a CUDA graph's memory,
//    kernels/cuda/runtime/graph.h): while held, its cached blocks are never given back, since
//    the graph writes them at every replay; released, its blocks, cached and in use, become its
//    home stream's (the stream its graph was replayed on, which orders any reuse after the last
//    replay): reused by that stream's work, given back at the next emptying (which waits for
//    the device first). A pool's request its own cache cannot serve takes a cached block of its
//    home stream before the backing allocator (a recording cannot wait for an emptying, so
//    under pressure a recording made again must reuse its predecessor's memory). Releasing a
//    pool itself neither waits nor fails: a graph is destroyed while an error unwinds, too.
// Statistics: allocated (bytes of blocks in use, by class size), reserved (allocated plus
// cached), their peaks, and counts of backing calls and cache hits.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bareyolo {

struct MemoryStats {
  size_t allocated = 0, reserved = 0;  // bytes: blocks in use; in use plus cached
  size_t peak_allocated = 0, peak_reserved = 0;
  uint64_t backing_allocations = 0, backing_frees = 0, cache_hits = 0;
};

// A request the device cannot hold even after the cache went back: the one failure a caller
// may recover from (AutoBatch's probe takes it as "this batch does not fit").
class OutOfDeviceMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CachingAllocator {
 public:
  // How blocks are obtained from and returned to the device. allocate returns nullptr when
  // the device is out of memory (and throws for any other failure); synchronize waits until
  // no queued work can still touch a cached block, before blocks go back.
  struct Backing {
    std::string name;  // "cuda:0", for messages
    std::function<void*(size_t bytes)> allocate;
    std::function<void(void* pointer)> release;
    std::function<void()> synchronize;
    // Keep the reserve within twice the peak in use (see the file comment); a GPU keeps every
    // block, since giving one back synchronises the device.
    bool bounded_reserve = false;
  };

  static constexpr size_t kMinBlock = 512;
  static constexpr int kClassesPerOctave = 8;

  explicit CachingAllocator(Backing backing) : backing_(std::move(backing)) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() { empty_cache(); }  // blocks still in use stay with their owners

  // Requests beyond this many bytes are refused (no device comes near; the rounding below
  // must not overflow).
  static constexpr size_t kMaxRequest = size_t{1} << 56;

  // The block size a request of `bytes` gets: the smallest class >= bytes.
  static size_t size_class(size_t bytes) {
    if (bytes <= kMinBlock) return kMinBlock;
    if (bytes > kMaxRequest)
      throw std::length_error("cannot allocate " + std::to_string(bytes) +
                              " bytes of device memory: beyond any device");
    const size_t base = std::bit_floor(bytes), step = base / kClassesPerOctave;
    return base + (bytes - base + step - 1) / step * step;
  }

  // A block of at least `bytes` for work on `stream` (any non-null tag for one stream);
  // `from_backing` as try_allocate's.
  void* allocate(size_t bytes, const void* stream, bool* from_backing = nullptr) {
    if (void* pointer = try_allocate(bytes, stream, from_backing)) return pointer;
    throw OutOfDeviceMemory("cannot allocate " + std::to_string(bytes) + " bytes on " +
                            backing_.name + ": out of device memory (" +
                            std::to_string(stats().allocated) +
                            " bytes in use by this process); use a smaller batch or image size");
  }

  // allocate(), but nullptr when even the emptied cache leaves the backing allocator short.
  // `from_backing`, when given, says whether the block came from the backing allocator (a
  // cache miss) rather than the cache.
  void* try_allocate(size_t bytes, const void* stream, bool* from_backing = nullptr) {
    const size_t block = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    void* pointer = nullptr;
    auto cached = free_.find({stream, block});
    if (cached == free_.end() || cached->second.empty()) cached = home_list_of(stream, block);
    if (from_backing) *from_backing = false;
    if (cached != free_.end() && !cached->second.empty()) {
      pointer = *cached->second.begin();
      cached->second.erase(cached->second.begin());
      ++stats_.cache_hits;
    } else {
      const size_t peak = std::max(stats_.peak_allocated, stats_.allocated + block);
      if (backing_.bounded_reserve && stats_.reserved + block > 2 * peak) release_cached_locked();
      pointer = backing_.allocate(block);
      if (!pointer) {  // out of memory: give the cache back and try once more
        release_cached_locked();
        pointer = backing_.allocate(block);
      }
      if (!pointer) return nullptr;
      if (from_backing) *from_backing = true;
      ++stats_.backing_allocations;
      stats_.reserved += block;
      stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    }
    live_[pointer] = {stream, block};
    stats_.allocated += block;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    return pointer;
  }

  // Puts a block from allocate() back on its stream's free list; nullptr is ignored. A
  // pointer this allocator did not hand out (or a second release) throws.
  void release(void* pointer) {
    if (!pointer) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = live_.find(pointer);
    if (found == live_.end())
      throw std::invalid_argument("allocator of " + backing_.name +
                                  ": release of a pointer that is not an allocated block "
                                  "(freed twice, or never allocated here)");
    const Block block = found->second;
    live_.erase(found);
    stats_.allocated -= block.bytes;
    free_[{block.stream, block.bytes}].insert(pointer);
  }

  // Keeps the cached blocks of pool `tag` from being given back until release_pool(tag), which
  // hands the pool's blocks, cached and in use, to stream `home` (without that, blocks under
  // the tag of a destroyed graph could never be reused).
  void hold_pool(const void* tag, const void* home) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_[tag] = home;
  }
  void release_pool(const void* tag) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = held_.find(tag);
    if (found == held_.end()) return;
    const void* home = found->second;
    held_.erase(found);
    for (auto list = free_.lower_bound({tag, 0}); list != free_.end() && list->first.first == tag;
         list = free_.erase(list))
      free_[{home, list->first.second}].merge(list->second);
    for (auto& [pointer, block] : live_)
      if (block.stream == tag) block.stream = home;
  }

  // Returns every cached (free) block to the backing allocator, but a held pool's.
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_locked();
  }

  MemoryStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peaks() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }

 private:
  struct Block {
    const void* stream;
    size_t bytes;
  };
  using FreeListKey = std::pair<const void*, size_t>;  // (stream, size class)

  // For a held pool's request that its own cached blocks cannot serve: the free list of its home
  // stream, whose blocks the pool may take (its graph replays on that stream, after their last
  // use), so that a recording made again under pressure reuses the memory of the one before
  // it. free_.end() for a stream's request.
  std::map<FreeListKey, std::set<void*>>::iterator home_list_of(const void* tag, size_t block) {
    const auto pool = held_.find(tag);
    return pool == held_.end() ? free_.end() : free_.find({pool->second, block});
  }

  void release_cached_locked() {
    bool any = false;
    for (const auto& entry : free_) any = any || (!entry.second.empty() && !held(entry.first));
    if (!any) return;
    backing_.synchronize();
    for (auto& [key, pointers] : free_) {
      if (held(key)) continue;
      for (void* pointer : pointers) {
        backing_.release(pointer);
        ++stats_.backing_frees;
        stats_.reserved -= key.second;
      }
      pointers.clear();
    }
  }

  Backing backing_;
  mutable std::mutex mutex_;
  std::map<FreeListKey, std::set<void*>> free_;  // each list in address order
  bool held(const FreeListKey& key) const { return held_.count(key.first) > 0; }

  std::unordered_map<void*, Block> live_;
  std::map<const void*, const void*> held_;  // pools whose cached blocks stay: their homes
  MemoryStats stats_;
};

}  // namespace bareyolo

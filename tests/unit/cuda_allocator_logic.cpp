// tests/unit/cuda_allocator_logic.cpp — the caching device allocator's bookkeeping
// (kernels/cuda/runtime/allocator.h), driven by a fake backing allocator so it runs without a GPU:
// size classes, reuse per stream, no backing calls in a steady state, statistics, emptying
// the cache, the out-of-memory retry, and misuse.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/runtime/allocator.h"

using bareyolo::cuda::CachingAllocator;
using bareyolo::cuda::OutOfDeviceMemory;

namespace {

// Hands out distinct fake addresses (never dereferenced) up to a capacity in bytes.
struct FakeDevice {
  size_t capacity = size_t{1} << 40;
  size_t used = 0;  // bytes handed out and not yet released
  uintptr_t next_address = 0x1000;
  int allocations = 0, releases = 0, synchronizations = 0;
  std::map<void*, size_t> live;

  CachingAllocator::Backing backing() {
    return {"fake:0",
            [this](size_t bytes) -> void* {
              if (used + bytes > capacity) return nullptr;
              used += bytes;
              ++allocations;
              void* pointer = reinterpret_cast<void*>(next_address);
              next_address += bytes + 256;
              live[pointer] = bytes;
              return pointer;
            },
            [this](void* pointer) {
              REQUIRE(live.count(pointer) == 1);
              used -= live[pointer];
              live.erase(pointer);
              ++releases;
            },
            [this] { ++synchronizations; }};
  }
};

int stream_a = 0, stream_b = 0;  // their addresses tag two streams

}  // namespace

TEST_CASE("allocator size classes: the smallest class that fits, at most 1/8 slack") {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> any_size(0, size_t{1} << 34);
  for (int trial = 0; trial < 20000; ++trial) {
    // Half the trials near powers of two, where rounding goes wrong first.
    size_t bytes = any_size(rng);
    if (trial % 2) bytes = (size_t{1} << (2 + trial % 32)) + (trial % 5) - 2;
    const size_t block = CachingAllocator::size_class(bytes);
    REQUIRE(block >= bytes);
    REQUIRE(block >= CachingAllocator::kMinBlock);
    if (bytes > CachingAllocator::kMinBlock) REQUIRE(block - bytes <= block / 8);
    REQUIRE(CachingAllocator::size_class(block) == block);      // a class maps to itself
    REQUIRE(CachingAllocator::size_class(block + 1) > block);   // and is the smallest fit
    REQUIRE(CachingAllocator::size_class(bytes + 1) >= block);  // monotonic
  }
  // The classes between 512 and 1024 are 512 + 64 k.
  CHECK(CachingAllocator::size_class(513) == 576);
  CHECK(CachingAllocator::size_class(1000) == 1024);
  CHECK(CachingAllocator::size_class(1025) == 1152);
  // A request no device could hold is refused before any rounding overflows.
  CHECK_THROWS_AS(CachingAllocator::size_class(CachingAllocator::kMaxRequest + 1),
                  std::length_error);
  CHECK_THROWS_AS(CachingAllocator::size_class(~size_t{0}), std::length_error);
}

TEST_CASE("allocator reuses freed blocks: a repeated step makes no backing calls") {
  FakeDevice device;
  CachingAllocator allocator(device.backing());
  // One "training step": tensors of assorted sizes, some freed mid-step, all by its end.
  const std::vector<size_t> sizes = {3 * 640 * 640 * 4,  16 * 320 * 320 * 4, 4096, 1,
                                     16 * 320 * 320 * 4, 32 * 160 * 160 * 4, 7777};
  auto step = [&] {
    std::vector<void*> held;
    for (size_t i = 0; i < sizes.size(); ++i) {
      held.push_back(allocator.allocate(sizes[i], &stream_a));
      if (i % 3 == 2) {  // free one early: its block serves a later request of its class
        allocator.release(held[i - 1]);
        held[i - 1] = nullptr;
      }
    }
    for (void* pointer : held) allocator.release(pointer);
  };
  step();
  const auto after_first = allocator.stats();
  CHECK(after_first.allocated == 0);
  CHECK(after_first.backing_allocations == static_cast<uint64_t>(device.allocations));
  for (int i = 0; i < 5; ++i) step();
  const auto after_six = allocator.stats();
  CHECK(device.allocations == static_cast<int>(after_first.backing_allocations));
  CHECK(device.releases == 0);
  CHECK(after_six.backing_allocations == after_first.backing_allocations);
  CHECK(after_six.cache_hits == after_first.cache_hits + 5 * sizes.size());
  CHECK(after_six.reserved == after_first.reserved);
  CHECK(after_six.peak_reserved == after_first.peak_reserved);
}

TEST_CASE("allocator keeps free lists per stream and per class") {
  FakeDevice device;
  CachingAllocator allocator(device.backing());
  void* first = allocator.allocate(1 << 20, &stream_a);
  allocator.release(first);
  // Another stream never gets a block freed on stream a (its work is not ordered after it).
  void* other_stream = allocator.allocate(1 << 20, &stream_b);
  CHECK(other_stream != first);
  // Another class on the same stream does not get it either.
  void* other_class = allocator.allocate((1 << 20) + (1 << 18), &stream_a);
  CHECK(other_class != first);
  // A request of the same class on the same stream does, even of a different byte count.
  void* same = allocator.allocate((1 << 20) - 100, &stream_a);
  CHECK(same == first);
  CHECK(device.allocations == 3);
  CHECK(allocator.stats().cache_hits == 1);
  for (void* pointer : {other_stream, other_class, same}) allocator.release(pointer);
}

TEST_CASE("allocator statistics follow allocations, frees and empty_cache") {
  FakeDevice device;
  CachingAllocator allocator(device.backing());
  const size_t a_bytes = 1000, b_bytes = 5000;
  const size_t a_block = CachingAllocator::size_class(a_bytes),
               b_block = CachingAllocator::size_class(b_bytes);
  void* a = allocator.allocate(a_bytes, &stream_a);
  void* b = allocator.allocate(b_bytes, &stream_a);
  auto stats = allocator.stats();
  CHECK(stats.allocated == a_block + b_block);
  CHECK(stats.reserved == a_block + b_block);
  CHECK(stats.peak_allocated == a_block + b_block);
  allocator.release(b);
  stats = allocator.stats();
  CHECK(stats.allocated == a_block);
  CHECK(stats.reserved == a_block + b_block);  // b is cached, not returned
  CHECK(stats.peak_allocated == a_block + b_block);
  allocator.reset_peaks();
  CHECK(allocator.stats().peak_allocated == a_block);

  allocator.empty_cache();
  stats = allocator.stats();
  CHECK(device.synchronizations == 1);  // queued work is waited for before blocks go back
  CHECK(device.releases == 1);
  CHECK(stats.backing_frees == 1);
  CHECK(stats.reserved == a_block);
  CHECK(stats.allocated == a_block);
  CHECK(device.used == a_block);
  allocator.release(a);
  allocator.empty_cache();
  CHECK(allocator.stats().reserved == 0);
  CHECK(device.live.empty());
}

TEST_CASE("allocator pool: held blocks stay, and released ones are their home stream's") {
  FakeDevice device;
  CachingAllocator allocator(device.backing());
  const char pool = 0;  // a CUDA graph's tag; the graph is replayed on stream a
  allocator.hold_pool(&pool, &stream_a);
  allocator.release(allocator.allocate(1000, &pool));
  allocator.release(allocator.allocate(1000, &stream_a));
  allocator.empty_cache();  // the stream's block goes, the held pool's stays
  CHECK(device.releases == 1);
  void* again = allocator.allocate(1000, &pool);   // from the pool's cache
  void* in_use = allocator.allocate(5000, &pool);  // still in use when the graph goes
  CHECK(device.allocations == 3);
  allocator.release(again);
  allocator.release_pool(&pool);  // a destroyed graph's: no wait for the device, no backing call
  CHECK(device.synchronizations == 1);
  CHECK(device.releases == 1);
  // Its blocks are stream a's now, the one in use too once freed: reused there, not stranded
  // under the tag of a graph that is gone.
  CHECK(allocator.allocate(1000, &stream_a) == again);
  allocator.release(in_use);
  CHECK(allocator.allocate(5000, &stream_a) == in_use);
  CHECK(allocator.allocate(1000, &stream_b) != again);  // another stream's work does not get them
  CHECK(device.allocations == 4);
  for (void* block : {again, in_use}) allocator.release(block);
  allocator.empty_cache();  // like any cached block
  CHECK(device.synchronizations == 2);
  CHECK(device.releases == 3);
  CHECK(allocator.stats().allocated == allocator.stats().reserved);  // stream b's, still in use
}

// A recording made again, under memory pressure, cannot wait for an emptying: its pool takes the
// cached blocks of the stream its graph replays on before it asks the backing allocator.
TEST_CASE("allocator pool: a request its cache cannot serve takes a home stream's block") {
  FakeDevice device;
  CachingAllocator allocator(device.backing());
  void* cached = allocator.allocate(1000, &stream_a);
  allocator.release(cached);            // a launched step's block, cached on stream a
  const char pool = 0, other_pool = 0;  // graphs replayed on stream a and on stream b
  allocator.hold_pool(&pool, &stream_a);
  allocator.hold_pool(&other_pool, &stream_b);
  void* taken = allocator.allocate(1000, &pool);
  CHECK(taken == cached);
  CHECK(device.allocations == 1);
  allocator.release(taken);  // the pool's now: held, not stream a's
  void* fresh = allocator.allocate(1000, &stream_a);
  CHECK(fresh != cached);
  allocator.release(fresh);
  CHECK(allocator.allocate(1000, &other_pool) != fresh);  // stream a's blocks are not its
  CHECK(device.allocations == 3);
  allocator.empty_cache();  // stream a's block goes; the pools' stay
  CHECK(device.releases == 1);
}

TEST_CASE("allocator out of memory: gives the cache back, retries once, then fails clearly") {
  FakeDevice device;
  device.capacity = 8 << 20;
  CachingAllocator allocator(device.backing());
  void* cached = allocator.allocate(3 << 20, &stream_a);
  void* held = allocator.allocate(2 << 20, &stream_a);
  allocator.release(cached);  // 3 MiB cached, 2 MiB in use, 3 MiB left on the fake device

  // 5 MiB fit only once the cached 3 MiB go back.
  void* big = allocator.allocate(5 << 20, &stream_a);
  CHECK(big != nullptr);
  CHECK(device.releases == 1);
  CHECK(allocator.stats().reserved == (7u << 20));

  // 2 MiB more cannot fit at all (1 MiB left, nothing cached): a message, not a crash.
  try {
    allocator.allocate(2 << 20, &stream_a);
    FAIL("an allocation beyond the device's memory succeeded");
  } catch (const OutOfDeviceMemory& error) {  // the type AutoBatch's probe recovers from
    const std::string message = error.what();
    CHECK(message.find("out of device memory") != std::string::npos);
    CHECK(message.find("fake:0") != std::string::npos);
    CHECK(message.find(std::to_string(2 << 20)) != std::string::npos);
  }
  CHECK(allocator.stats().allocated == (7u << 20));  // the failure changed no books
  allocator.release(big);
  allocator.release(held);
}

TEST_CASE("allocator refuses pointers it did not hand out, and double frees") {
  FakeDevice device;
  CachingAllocator allocator(device.backing());
  int not_a_block = 0;
  CHECK_THROWS_AS(allocator.release(&not_a_block), std::invalid_argument);
  void* block = allocator.allocate(100, &stream_a);
  allocator.release(block);
  CHECK_THROWS_WITH_AS(allocator.release(block), doctest::Contains("freed twice"),
                       std::invalid_argument);
  allocator.release(nullptr);  // like free(nullptr): nothing
  CHECK(allocator.stats().allocated == 0);
}

TEST_CASE("allocator with a bounded reserve: repeated steps keep their blocks, new shapes trim") {
  FakeDevice device;
  CachingAllocator::Backing backing = device.backing();
  backing.bounded_reserve = true;
  CachingAllocator allocator(backing);
  // A "step" of three blocks, repeated: after the first, every request is a cache hit.
  auto step = [&](size_t base) {
    std::vector<void*> blocks;
    for (size_t k = 1; k <= 3; ++k) blocks.push_back(allocator.allocate(base * k, &stream_a));
    for (void* block : blocks) allocator.release(block);
  };
  step(1 << 20);
  const int misses = device.allocations;
  for (int repeat = 0; repeat < 5; ++repeat) step(1 << 20);
  CHECK(device.allocations == misses);
  CHECK(device.releases == 0);
  // Steps of ever other sizes: the reserve never passes twice the peak in use.
  for (size_t base = (1 << 20) + 4096; base < (3 << 20); base += 200'000) {
    step(base);
    CHECK(allocator.stats().reserved <= 2 * allocator.stats().peak_allocated);
  }
  CHECK(device.releases > 0);
}

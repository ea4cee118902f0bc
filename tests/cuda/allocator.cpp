// tests/cuda/allocator.cpp — the caching allocator on a real GPU: device tensors come from it,
// a repeated pattern of tensors makes no cudaMalloc, memory written through a reused block
// reads back, empty_cache returns the cache, and an impossible request fails with a message.
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// One "step" of tensors of yolov5n-like sizes, each filled and read back.
void tensor_step(Rng& rng) {
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> held;
  for (Shape4 s : {Shape4{4, 3, 64, 64}, Shape4{4, 16, 32, 32}, Shape4{4, 32, 16, 16},
                   Shape4{4, 16, 32, 32}, Shape4{1, 16, 1, 1}}) {
    const std::vector<float> values = random_vector<float>(rng, s.numel());
    held.push_back(Tensor::from_vector(values, s, gpu));
    CHECK(held.back().to_vector<float>() == values);
    if (held.size() == 3) held.erase(held.begin());  // one freed mid-step
  }
}

}  // namespace

TEST_CASE("cuda allocator: a repeated step of tensors makes no new device allocation") {
  Rng rng(91);
  tensor_step(rng);
  const cuda::MemoryStats first = cuda::memory_stats(0);
  for (int i = 0; i < 3; ++i) tensor_step(rng);
  const cuda::MemoryStats later = cuda::memory_stats(0);
  CHECK(later.backing_allocations == first.backing_allocations);
  CHECK(later.cache_hits >= first.cache_hits + 3 * 5);
  CHECK(later.allocated == first.allocated);  // everything of the steps was freed
  CHECK(later.peak_reserved == first.peak_reserved);
}

TEST_CASE("cuda allocator statistics and empty_cache") {
  const Device gpu = Device::cuda(0);
  const size_t before = cuda::memory_stats(0).allocated;
  {
    Tensor t = Tensor::zeros({1, 1, 1, 1000}, gpu);
    const cuda::MemoryStats stats = cuda::memory_stats(0);
    CHECK(stats.allocated == before + cuda::CachingAllocator::size_class(4000));
    CHECK(stats.reserved >= stats.allocated);
    CHECK(stats.peak_allocated >= stats.allocated);
  }
  CHECK(cuda::memory_stats(0).allocated == before);
  cuda::empty_cache(0);
  const cuda::MemoryStats emptied = cuda::memory_stats(0);
  CHECK(emptied.reserved == emptied.allocated);
  // Memory still works after the cache went back.
  Tensor again = Tensor::from_vector(std::vector<float>{1, 2, 3}, {1, 1, 1, 3}, gpu);
  CHECK(again.to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("cuda allocator: a request beyond the device's memory fails with a message") {
  try {
    Tensor huge = Tensor::empty({1, 1, 1, int64_t{1} << 48}, Device::cuda(0));  // 1 PiB
    FAIL("a 1 PiB device tensor was allocated");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()).find("out of device memory") != std::string::npos);
  }
  // The device is still usable.
  Tensor small = Tensor::zeros({1, 1, 1, 16}, Device::cuda(0));
  CHECK(small.to_vector<float>() == std::vector<float>(16, 0.0f));
}

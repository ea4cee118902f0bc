// tests/unit/tensor.cpp — Tensor storage, zero-copy channel/image views, copies; ThreadPool.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "engine/tensor.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("tensor channel slice is a view with offset and the parent's batch stride") {
  std::vector<float> values(2 * 5 * 3 * 4);
  std::iota(values.begin(), values.end(), 1.0f);
  Tensor t = Tensor::from_vector(values, {2, 5, 3, 4});
  Tensor slice = t.channels(1, 3);
  CHECK(slice.shape() == Shape4{2, 2, 3, 4});
  CHECK(slice.offset() == 12);
  CHECK(slice.batch_stride() == 60);
  CHECK_FALSE(slice.dense());
  CHECK(slice.storage() == t.storage());
  // The second image of the slice starts at image 1, channel 1 of the parent.
  CHECK(slice.view<float>().image(1)[0] == values[60 + 12]);
  std::vector<float> copied = slice.to_vector<float>();
  REQUIRE(copied.size() == 48);
  CHECK(copied[0] == values[12]);
  CHECK(copied[24] == values[72]);
}

TEST_CASE("a producer writing into a channel slice fills the concatenated tensor") {
  // This is the zero-copy Concat: two SiLU outputs written straight into one buffer.
  Rng rng(31);
  Shape4 part = {2, 3, 4, 4};
  Tensor a = Tensor::from_vector(random_vector<float>(rng, part.numel()), part);
  Tensor b = Tensor::from_vector(random_vector<float>(rng, part.numel()), part);
  Tensor cat = Tensor::empty({2, 6, 4, 4});
  Tensor left = cat.channels(0, 3), right = cat.channels(3, 6);
  ops::silu_forward<float>(a.view<float>(), left.view<float>());
  ops::silu_forward<float>(b.view<float>(), right.view<float>());

  Tensor reference = Tensor::empty({2, 6, 4, 4});
  Tensor silu_a = Tensor::empty(part), silu_b = Tensor::empty(part);
  ops::silu_forward<float>(a.view<float>(), silu_a.view<float>());
  ops::silu_forward<float>(b.view<float>(), silu_b.view<float>());
  ops::concat_forward<float>({silu_a.view<float>(), silu_b.view<float>()}, reference.view<float>());
  CHECK(cat.to_vector<float>() == reference.to_vector<float>());
}

TEST_CASE("tensor image slice and copy_from between layouts") {
  Rng rng(32);
  Tensor t = Tensor::from_vector(random_vector<double>(rng, 4 * 2 * 3 * 3), {4, 2, 3, 3});
  Tensor middle = t.images(1, 3);
  CHECK(middle.shape().n == 2);
  CHECK(middle.offset() == 18);
  Tensor strided_target = Tensor::zeros({2, 5, 3, 3}, Device::cpu(), DType::f64).channels(2, 4);
  strided_target.copy_from(middle);
  CHECK(strided_target.to_vector<double>() == middle.to_vector<double>());
  strided_target.zero();
  for (double v : strided_target.to_vector<double>()) CHECK(v == 0.0);
}

TEST_CASE("zero clears a channel slice of many pool chunks, and nothing around it") {
  // 3 x 40 x 64 x 64 floats: each image's slice of 20 channels is 320 KB, over one chunk of
  // the parallel zero (kernels/cpu/loops.h), and 2 threads share it.
  const PoolThreads two_threads(2);
  Rng rng(33);
  const Shape4 shape = {3, 40, 64, 64};
  std::vector<float> values = random_vector<float>(rng, shape.numel());
  for (float& v : values) v += 2.0f;  // no zeros to start with
  Tensor t = Tensor::from_vector(values, shape);
  t.channels(10, 30).zero();
  const std::vector<float> after = t.to_vector<float>();
  const int64_t plane = 64 * 64;
  int64_t wrong = 0;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const int64_t channel = i / plane % shape.c;
    const float expected = channel >= 10 && channel < 30 ? 0.0f : values[size_t(i)];
    wrong += after[size_t(i)] != expected;
  }
  CHECK(wrong == 0);
}

TEST_CASE("tensor errors name the problem") {
  Tensor t = Tensor::zeros({1, 4, 2, 2});
  CHECK_THROWS_WITH_AS(t.channels(2, 6), doctest::Contains("outside the 4 channels"),
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(t.view<double>(), doctest::Contains("holds f32"), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::from_vector(std::vector<float>(3), {1, 1, 2, 2}), std::invalid_argument);
}

TEST_CASE("a host allocation beyond the machine fails with a sentence, still a bad_alloc") {
  // Before: "bareyolo: error: std::bad_alloc". 2^45 floats (128 TiB) exceed any address space.
  const Shape4 huge{1 << 15, 1 << 15, 1 << 7, 1 << 8};
  CHECK_THROWS_WITH_AS(Tensor::empty(huge),
                       doctest::Contains("out of host memory: cannot allocate 131072.00 GiB for a "
                                         "tensor"),
                       HostOutOfMemory);
  CHECK_THROWS_WITH_AS(Tensor::empty(huge), doctest::Contains("try a smaller --batch or --imgsz"),
                       std::bad_alloc);
}

TEST_CASE("thread pool covers every index once and rethrows errors") {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, 7, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) CHECK(h.load() == 1);
  CHECK_THROWS_WITH(pool.parallel_for(100, 1,
                                      [](int64_t begin, int64_t) {
                                        if (begin == 42) throw std::runtime_error("chunk 42");
                                      }),
                    "chunk 42");
  // Nested loops run inline on the thread that issued them instead of deadlocking.
  std::atomic<int64_t> total{0};
  pool.parallel_for(8, 1, [&](int64_t, int64_t) {
    pool.parallel_for(10, 3, [&](int64_t begin, int64_t end) { total += end - begin; });
  });
  CHECK(total.load() == 80);
}

TEST_CASE("thread pool: each thread starts on its own share of the chunks") {
  // Two threads, 8 chunks: the caller's share is chunks 0-3, the worker's 4-7. The first
  // chunk each thread runs waits (at most 10 s) until the other thread has started one too,
  // so both claim their first chunk before either can take the other's: from their own
  // shares, 0 and 4. (With one counter for the whole loop they were 0 and 1.)
  ThreadPool pool(2);
  std::mutex mutex;
  std::condition_variable both_started;
  std::map<std::thread::id, int64_t> first_chunk;
  pool.parallel_for(8, 1, [&](int64_t begin, int64_t) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!first_chunk.emplace(std::this_thread::get_id(), begin).second) return;
    both_started.notify_all();
    both_started.wait_for(lock, std::chrono::seconds(10), [&] { return first_chunk.size() == 2; });
  });
  REQUIRE(first_chunk.size() == 2);
  std::set<int64_t> firsts;
  for (const auto& [thread, chunk] : first_chunk) firsts.insert(chunk);
  CHECK(firsts == std::set<int64_t>{0, 4});
}

TEST_CASE("device without CUDA is reported, not a crash") {
  Tensor host = Tensor::zeros({1, 1, 1, 4});
  if (cuda::device_count() == 0) CHECK_THROWS_AS(host.to(Device::cuda(0)), std::runtime_error);
}

TEST_CASE("thread pool stays sound across many loops that throw") {
  // A loop that throws leaves chunks unclaimed; a worker waking late must not run them.
  ThreadPool pool(3);
  for (int round = 0; round < 2000; ++round) {
    CHECK_THROWS(pool.parallel_for(64, 1, [](int64_t begin, int64_t) {
      if (begin == 1) throw std::runtime_error("chunk 1");
    }));
    std::atomic<int64_t> covered{0};
    pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) { covered += end - begin; });
    REQUIRE(covered.load() == 64);
  }
}

// tests/unit/op_profile.cpp — the per-op profile (kernels/op_profile.h): each routed CPU op is
// counted under its name while profiling is on, an op that runs other ops counts once, and
// nothing is recorded while it is off; the thread pool's loops and waits go to the open op.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "engine/tensor.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"

using namespace bareyolo;

namespace {

Tensor random_tensor(Shape4 shape, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> values(size_t(shape.numel()));
  for (float& v : values) v = value(random);
  return Tensor::from_vector(values, shape);
}

}  // namespace

TEST_CASE("op profile: routed CPU ops are counted once each, the outer op only, when on") {
  const Tensor x = random_tensor({2, 3, 8, 8}, 1);
  Tensor y = Tensor::zeros(x.shape());
  std::vector<float> gamma(3, 1.0f), beta(3, 0.0f), running_mean(3, 0.0f), running_var(3, 1.0f),
      save_mean(3), save_invstd(3);
  auto run_ops = [&] {
    ops::silu_forward<float>(x.view<float>(), y.view<float>());
    ops::silu_forward<float>(x.view<float>(), y.view<float>());
    // Runs batchnorm_train_statistics and batchnorm_apply inside: counted as itself only.
    ops::batchnorm_forward_train<float>(x.view<float>(), gamma.data(), beta.data(), {},
                                        running_mean.data(), running_var.data(), save_mean.data(),
                                        save_invstd.data(), y.view<float>());
  };

  op_profile::take();
  op_profile::enable(false);
  run_ops();
  CHECK(op_profile::take().empty());

  op_profile::enable(true);
  run_ops();
  op_profile::enable(false);
  const std::map<std::string, op_profile::Totals> totals = op_profile::take();
  REQUIRE(totals.size() == 2);
  REQUIRE(totals.count("silu_forward") == 1);
  REQUIRE(totals.count("batchnorm_forward_train") == 1);
  CHECK(totals.at("silu_forward").calls == 2);
  CHECK(totals.at("batchnorm_forward_train").calls == 1);
  CHECK(totals.at("silu_forward").seconds > 0);
  CHECK(totals.at("batchnorm_forward_train").seconds > 0);
  CHECK(op_profile::take().empty());  // take() cleared them
}

TEST_CASE("op profile: the pool's loops and their waiting are counted to the open op") {
  // Two threads, two chunks: the worker's chunk returns at once; the caller's waits for it
  // (at most 10 s), then sleeps 40 ms, so the worker waits at least those 40 ms of the loop.
  // 20 ms of sleep after the loop are the op's serial part.
  ThreadPool pool(2);
  std::mutex mutex;
  std::condition_variable worker_done;
  bool done = false;
  op_profile::take();
  op_profile::enable(true);
  {
    const op_profile::Timer timer("pool_test");
    pool.parallel_for(2, 1, [&](int64_t begin, int64_t) {
      std::unique_lock<std::mutex> lock(mutex);
      if (begin == 1) {
        done = true;
        worker_done.notify_all();
        return;
      }
      worker_done.wait_for(lock, std::chrono::seconds(10), [&] { return done; });
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  op_profile::enable(false);
  const std::map<std::string, op_profile::Totals> totals = op_profile::take();
  REQUIRE(totals.count("pool_test") == 1);
  const op_profile::Totals& t = totals.at("pool_test");
  CHECK(t.pool_loop_seconds >= 0.04);
  CHECK(t.seconds >= t.pool_loop_seconds + 0.02);
  CHECK(t.pool_wait_seconds >= 0.035);
  CHECK(t.pool_wait_seconds <= 2 * t.pool_loop_seconds);
  // Idle: the waits in the loop and the worker's time beside the serial 20 ms, over 2 threads.
  const double expected =
      (t.pool_wait_seconds + (t.seconds - t.pool_loop_seconds)) / (2 * t.seconds);
  CHECK(op_profile::idle_share(t, 2) == doctest::Approx(expected));
  CHECK(op_profile::idle_share(t, 2) > 0.3);
}

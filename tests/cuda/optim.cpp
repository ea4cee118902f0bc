// tests/cuda/optim.cpp — the optimizer ops on the GPU against the CPU: SGD (Nesterov and
// plain, with weight decay), EMA, scale (float32 tolerance: the GPU may fuse a multiply-add
// the CPU rounds twice), and the sum of squares (double accumulation in another order:
// relative 1e-12), on flat buffers of sizes that do not divide the grid, and on a strided view.
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {
const int64_t kSizes[] = {1, 1000, 1 << 20, (1 << 20) + 37};
}

TEST_CASE("cuda sgd step equals the cpu") {
  Rng rng(81);
  for (bool nesterov : {true, false})
    for (int64_t count : kSizes) {
      const Shape4 s{1, 1, 1, count};
      ops::SgdParams p{0.01, 0.937, 5e-4, nesterov};
      compare_cuda_with_cpu(
          {random_tensor(rng, s)}, {random_tensor(rng, s), random_tensor(rng, s)},
          [p](auto& in, auto& out) {
            ops::sgd_step<float>(out[0].template view<float>(), in[0].template view<float>(),
                                 out[1].template view<float>(), p);
          },
          "sgd step (param, velocity)", false);
    }
}

TEST_CASE("cuda ema update and scale equal the cpu") {
  Rng rng(82);
  for (int64_t count : kSizes) {
    const Shape4 s{1, 1, 1, count};
    compare_cuda_with_cpu(
        {random_tensor(rng, s)}, {random_tensor(rng, s)},
        [](auto& in, auto& out) {
          ops::ema_update<float>(out[0].template view<float>(), in[0].template view<float>(),
                                 0.9999);
        },
        "ema update", false);
    compare_cuda_with_cpu(
        {}, {random_tensor(rng, s)},
        [](auto&, auto& out) { ops::scale_inplace<float>(out[0].template view<float>(), 0.37); },
        "scale", false);
  }
}

TEST_CASE("cuda sum of squares equals the cpu, dense and strided") {
  Rng rng(83);
  for (int64_t count : kSizes) {
    Tensor x = random_tensor(rng, {1, 1, 1, count});
    const double cpu = ops::sum_of_squares<float>(x.view<float>());
    const Tensor gpu_x = x.to(Device::cuda(0));
    const double gpu = ops::sum_of_squares<float>(gpu_x.view<float>());
    CHECK(gpu == doctest::Approx(cpu).epsilon(1e-12));
    // Deterministic: the same bits again.
    CHECK(ops::sum_of_squares<float>(gpu_x.view<float>()) == gpu);
  }
  Tensor parent = random_tensor(rng, {5, 7, 9, 11});
  const Tensor gpu_parent = parent.to(Device::cuda(0));
  const double cpu = ops::sum_of_squares<float>(parent.channels(2, 6).view<float>());
  const double gpu = ops::sum_of_squares<float>(gpu_parent.channels(2, 6).view<float>());
  CHECK(gpu == doctest::Approx(cpu).epsilon(1e-12));
}

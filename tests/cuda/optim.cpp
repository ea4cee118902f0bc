// tests/cuda/optim.cpp — the optimizer ops on the GPU against the CPU: SGD over three parameter
// groups in one pass (Nesterov and plain, with weight decay), EMA, clipping to a norm whose sum
// of squares stays on the device (float32 tolerance: the GPU may fuse a multiply-add the CPU
// rounds twice), and the sum of squares (double accumulation in another order: relative
// 1e-12), on flat buffers of sizes that do not divide the grid, and on a strided view.
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

const int64_t kSizes[] = {1, 1000, 1 << 20, (1 << 20) + 37};

// Each element's optimizer group, at random among three.
Tensor random_groups(Rng& rng, const Shape4& s) {
  std::vector<uint8_t> groups(size_t(s.numel()));
  for (uint8_t& g : groups) g = uint8_t(random_int(rng, 0, 2));
  return Tensor::from_vector(groups, s);
}

// x's sum of squares as the op leaves it on x's device, read back.
double sum_of_squares_on(const Tensor& x) {
  Tensor sum = Tensor::empty({1, 1, 1, 1}, x.device(), DType::f64);
  ops::sum_of_squares<float>(x.view<float>(), sum.view<double>());
  return sum.to_vector<double>().front();
}

}  // namespace

TEST_CASE("cuda sgd step equals the cpu, three groups in one pass") {
  Rng rng(81);
  const ops::SgdParams groups[] = {
      {0.1, 0.8, 0.0, true}, {0.01, 0.937, 5e-4, true}, {0.03, 0.9, 1e-3, false}};
  for (int64_t count : kSizes) {
    const Shape4 s{1, 1, 1, count};
    compare_cuda_with_cpu(
        {random_tensor(rng, s), random_groups(rng, s)},
        {random_tensor(rng, s), random_tensor(rng, s)},
        [&](auto& in, auto& out) {
          ops::sgd_step<float>(out[0].template view<float>(), in[0].template view<float>(),
                               out[1].template view<float>(), in[1].template view<uint8_t>(),
                               groups);
        },
        "sgd step (param, velocity)", false);
  }
}

TEST_CASE("cuda ema update and clip_to_norm equal the cpu") {
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
    // The sum of squares stays on each device and clip_to_norm reads it there; the norm of
    // values in [-3, 3] is above 1, so the scaling happens.
    compare_cuda_with_cpu(
        {}, {random_tensor(rng, s)},
        [](auto&, auto& out) {
          Tensor sum = Tensor::empty({1, 1, 1, 1}, out[0].device(), DType::f64);
          ops::sum_of_squares<float>(out[0].template view<float>(), sum.view<double>());
          ops::clip_to_norm<float>(out[0].template view<float>(), sum.view<double>(), 1.0);
        },
        "clip to norm", false);
  }
}

TEST_CASE("cuda sum of squares equals the cpu, dense and strided") {
  Rng rng(83);
  for (int64_t count : kSizes) {
    Tensor x = random_tensor(rng, {1, 1, 1, count});
    const double cpu = sum_of_squares_on(x);
    const Tensor gpu_x = x.to(Device::cuda(0));
    const double gpu = sum_of_squares_on(gpu_x);
    CHECK(gpu == doctest::Approx(cpu).epsilon(1e-12));
    // Deterministic: the same bits again.
    CHECK(sum_of_squares_on(gpu_x) == gpu);
  }
  Tensor parent = random_tensor(rng, {5, 7, 9, 11});
  const Tensor gpu_parent = parent.to(Device::cuda(0));
  const double cpu = sum_of_squares_on(parent.channels(2, 6));
  const double gpu = sum_of_squares_on(gpu_parent.channels(2, 6));
  CHECK(gpu == doctest::Approx(cpu).epsilon(1e-12));
}

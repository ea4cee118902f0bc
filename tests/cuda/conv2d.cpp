// tests/cuda/conv2d.cpp — the CUDA convolution (both paths: cuDNN, and im2col + cuBLAS) against
// itself: a second run of the forward and both backward passes repeats the first bit for bit,
// TF32 off and on, without a new device allocation (the algorithms and workspaces are cached),
// a shape's cuDNN descriptors are made once, at its first call, and its algorithms are timed
// then and taken from the process's table after (kernels/convolution_choices.h).
// Its comparisons with the CPU are the selftest's convolution checks
// (tools/selftest/convolution_checks.cpp, run on cuda:0 by tests/cuda/selftest.cpp).
#include <cmath>
#include <optional>
#include <vector>

#include "kernels/convolution_choices.h"
#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/ops.h"
#include "tests/support/random_tensor.h"
#include "tools/selftest/convolution_settings.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

Tensor uniform(Rng& rng, Shape4 shape) { return random_tensor(rng, shape, -1.0, 1.0); }

}  // namespace

TEST_CASE(
    "cuda conv2d repeats bit for bit, with no new device allocation after the first call, "
    "TF32 off and on") {
  Rng rng(73);
  const ops::Conv2dParams p{2, 2, 1, 1};
  const Shape4 x_shape{4, 16, 40, 40}, w_shape{32, 16, 3, 3}, y_shape{4, 32, 20, 20};
  const Device gpu = Device::cuda(0);
  Tensor x = uniform(rng, x_shape).to(gpu), w = uniform(rng, w_shape).to(gpu);
  Tensor dy = uniform(rng, y_shape).to(gpu);
  for (const bool tf32 : {false, true})
    for (cuda::ConvPath path : selftest::kConvPaths) {
      CAPTURE(tf32);
      CAPTURE(selftest::path_name(path));
      const selftest::ConvolutionSettings settings(path, tf32);
      auto run = [&] {  // the three passes, from zeroed gradients
        Tensor y = Tensor::empty(y_shape, gpu), dx = Tensor::zeros(x_shape, gpu),
               dw = Tensor::zeros(w_shape, gpu);
        ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), nullptr, p, y.view<float>());
        ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx.view<float>());
        ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, dw.view<float>(),
                                           nullptr);
        return std::vector<std::vector<float>>{y.to_vector<float>(), dx.to_vector<float>(),
                                               dw.to_vector<float>()};
      };
      const auto first = run();  // chooses the algorithms, fills the cache
      const auto before = cuda::memory_stats(0);
      const auto second = run();
      const auto after = cuda::memory_stats(0);
      for (size_t i = 0; i < first.size(); ++i)
        check_close(second[i], first[i], 0.0, 0.0, "second run");
      CHECK(after.backing_allocations == before.backing_allocations);
      CHECK(after.cache_hits > before.cache_hits);
    }
}

TEST_CASE("cuda conv2d: a shape's cuDNN descriptors are made at its first call, none after") {
  Rng rng(74);
  const selftest::ConvolutionSettings settings(ops::GpuConvolutionPath::cudnn, false);
  const Device gpu = Device::cuda(0);
  // A layer's three passes share one set of four descriptors; a second shape gets its own.
  auto passes = [&](Shape4 x_shape, Shape4 w_shape, ops::Conv2dParams p) {
    const Shape4 y_shape{x_shape.n, w_shape.n,
                         (x_shape.h + 2 * p.pad_h - w_shape.h) / p.stride_h + 1,
                         (x_shape.w + 2 * p.pad_w - w_shape.w) / p.stride_w + 1};
    Tensor x = uniform(rng, x_shape).to(gpu), w = uniform(rng, w_shape).to(gpu);
    Tensor dy = uniform(rng, y_shape).to(gpu), y = Tensor::empty(y_shape, gpu);
    Tensor dx = Tensor::zeros(x_shape, gpu), dw = Tensor::zeros(w_shape, gpu);
    ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), nullptr, p, y.view<float>());
    ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx.view<float>());
    ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, dw.view<float>(),
                                       nullptr);
    cuda::synchronize(0);
  };
  const ops::Conv2dParams strided{2, 2, 1, 1}, same{1, 1, 1, 1};
  const uint64_t before = cuda::convolution_descriptors_created();
  // Shapes no other test uses, so that their descriptors are not made already.
  passes({3, 7, 26, 22}, {13, 7, 3, 3}, strided);
  CHECK(cuda::convolution_descriptors_created() - before == 4);
  passes({3, 7, 26, 22}, {13, 7, 3, 3}, strided);  // again: none
  CHECK(cuda::convolution_descriptors_created() - before == 4);
  passes({3, 7, 18, 30}, {11, 7, 3, 3}, same);  // another shape: its own four
  CHECK(cuda::convolution_descriptors_created() - before == 8);
}

TEST_CASE(
    "cuda conv2d: a shape's first call times its candidates, later calls run the table's and "
    "allocate nothing") {
  Rng rng(75);
  const selftest::ConvolutionSettings settings(ops::GpuConvolutionPath::cudnn, false);
  const Device gpu = Device::cuda(0);
  const ops::Conv2dParams p{1, 1, 1, 1};
  const Shape4 x_shape{2, 5, 30, 26}, w_shape{9, 5, 3, 3}, y_shape{2, 9, 30, 26};  // its own
  Tensor x = uniform(rng, x_shape).to(gpu), w = uniform(rng, w_shape).to(gpu);
  Tensor dy = uniform(rng, y_shape).to(gpu);
  auto forward = [&] {
    Tensor y = Tensor::from_vector(  // poisoned: an element the call misses fails the check
        std::vector<float>(size_t(y_shape.numel()), std::nanf("")), y_shape, gpu);
    ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), nullptr, p, y.view<float>());
    return y.to_vector<float>();
  };
  const ops::ConvolutionChoices before = ops::convolution_choices(gpu);
  const std::vector<float> reference = forward();
  Tensor dx = Tensor::zeros(x_shape, gpu), dw = Tensor::zeros(w_shape, gpu);
  ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx.view<float>());
  ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, dw.view<float>(),
                                     nullptr);
  cuda::synchronize(0);
  // One new choice per pass, and the forward's (float has several candidates) was timed.
  std::optional<ops::ConvolutionKey> forward_key;
  int added = 0;
  for (const auto& [key, choice] : ops::convolution_choices(gpu)) {
    if (before.count(key)) continue;
    ++added;
    CHECK(key.in_channels == 5);
    CHECK(key.deterministic);
    if (key.pass == ops::ConvolutionPass::forward) {
      forward_key = key;
      CHECK(choice.milliseconds > 0);
    }
  }
  CHECK(added == 3);
  REQUIRE(forward_key);
  // A choice put in the table (as the cache file or rank 0 would) is what the next call runs:
  // one cuDNN refuses (no such algorithm) is chosen afresh and replaced, not an error; implicit
  // GEMM on FMAs matches the timed one.
  const ops::ConvolutionChoice timed = *ops::find_convolution_choice(gpu, *forward_key);
  ops::adopt_convolution_choices(gpu, {{*forward_key, {.algorithm = 99, .math = 3}}});
  const uint64_t refused = cuda::kept_convolution_choices_refused();
  // (Another algorithm sums in another order, an FFT's with its own rounding: 1e-4 of values
  // about 10 apart is far below a wrong result.)
  check_close(forward(), reference, 1e-4, 1e-4, "after a refused choice");
  CHECK(cuda::kept_convolution_choices_refused() == refused + 1);
  CHECK(ops::find_convolution_choice(gpu, *forward_key)->algorithm != 99);
  ops::adopt_convolution_choices(gpu, {{*forward_key, {.algorithm = 0, .math = 3}}});
  check_close(forward(), reference, 1e-4, 1e-4, "implicit GEMM against the timed choice");
  ops::adopt_convolution_choices(gpu, {{*forward_key, timed}});
  check_close(forward(), reference, 0.0, 0.0, "the timed choice again");
  // Warm, the three passes take the device's shared workspace: no allocator call at all, and
  // the workspace does not move.
  Tensor y = Tensor::empty(y_shape, gpu);
  const cuda::MemoryStats memory = cuda::memory_stats(0);
  const uint64_t moves = cuda::convolution_workspace_moves(0);
  ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), nullptr, p, y.view<float>());
  ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx.view<float>());
  ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, dw.view<float>(),
                                     nullptr);
  cuda::synchronize(0);
  const cuda::MemoryStats after = cuda::memory_stats(0);
  CHECK(after.cache_hits == memory.cache_hits);
  CHECK(after.backing_allocations == memory.backing_allocations);
  CHECK(cuda::convolution_workspace_moves(0) == moves);
}

// tests/cuda/batchnorm.cpp — the CUDA BatchNorm kernels against the CPU reference on random
// inputs, outputs poisoned with NaN first (accumulated outputs start random instead): the four
// SyncBatchNorm phases, training and evaluation forward and backward, the fused BN + SiLU,
// channel-slice views, and a batch whose mean dwarfs its spread; and the ConvBnSilu layer,
// which fuses BN with SiLU on a GPU (forward: one apply pass; backward: SiLU's gradient
// computed inside BN's reduce and apply, batchnorm_silu_backward_*), against the same layer
// on the CPU (train and eval, alone and as SyncBatchNorm over one rank).
//
// Tolerances (float32; the CPU sums in double, the GPU in float as short runs plus trees):
//  - elementwise outputs (y, dx): 1e-4 relative + 1e-5 absolute (values are O(1));
//  - per-channel sums over `count` values of size <= 1: 1e-4 relative + 1e-6 * count absolute
//    (float summation error is a few ulps of the summed magnitudes, which are <= count).
#include <array>
#include <memory>
#include <string>

#include "engine/distributed/comm/communicator.h"
#include "engine/layers/conv_bn_silu.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5, kSumAtolPerValue = 1e-6;

// yolov5n-like maps: odd sizes, few and many channels, a batch of one, 1x1 maps.
const Shape4 kShapes[] = {{2, 16, 33, 31}, {4, 32, 20, 20}, {1, 8, 7, 5}, {3, 64, 1, 1}};

Tensor channel_values(Rng& rng, int64_t c, double lo, double hi) {
  return random_tensor(rng, {1, c, 1, 1}, lo, hi);
}

float* data(Tensor& t) { return t.view<float>().data; }

double sum_tolerance(const Shape4& s) { return kSumAtolPerValue * double(s.n * s.plane()); }

}  // namespace

TEST_CASE("cuda batchnorm phases equal the cpu (moments, apply, backward reduce and apply)") {
  Rng rng(81);
  for (const Shape4& s : kShapes) {
    CAPTURE(s.str());
    const int64_t c = s.c, count = s.n * s.plane();
    Tensor x = random_tensor(rng, s, -2, 3), dy = random_tensor(rng, s, -1, 1);
    Tensor mean = channel_values(rng, c, -0.5, 0.5), invstd = channel_values(rng, c, 0.5, 2);
    Tensor gamma = channel_values(rng, c, 0.5, 1.5), beta = channel_values(rng, c, -1, 1);
    Tensor sums = channel_values(rng, c, -5, 5), sums_xhat = channel_values(rng, c, -5, 5);
    const Shape4 per_channel{1, c, 1, 1};

    compare_cuda_with_cpu(
        {x}, {Tensor::empty(per_channel)},
        [](auto& in, auto& out) {
          Tensor m2 = Tensor::empty(out[0].shape(), out[0].device());
          ops::batchnorm_moments<float>(in[0].template view<float>(), data(out[0]), data(m2));
        },
        "moments: mean", true, kRtol, kAtol);
    compare_cuda_with_cpu(
        {x}, {Tensor::empty(per_channel)},
        [](auto& in, auto& out) {
          Tensor mean_out = Tensor::empty(out[0].shape(), out[0].device());
          ops::batchnorm_moments<float>(in[0].template view<float>(), data(mean_out), data(out[0]));
        },
        "moments: M2", true, kRtol, sum_tolerance(s));
    compare_cuda_with_cpu(
        {x, mean, invstd, gamma, beta}, {Tensor::empty(s)},
        [](auto& in, auto& out) {
          ops::batchnorm_apply<float>(in[0].template view<float>(), data(in[1]), data(in[2]),
                                      data(in[3]), data(in[4]), out[0].template view<float>());
        },
        "apply", true, kRtol, kAtol);
    compare_cuda_with_cpu(
        {x, dy, mean, invstd}, {Tensor::empty(per_channel), Tensor::empty(per_channel)},
        [](auto& in, auto& out) {
          ops::batchnorm_backward_reduce<float>(in[0].template view<float>(),
                                                in[1].template view<float>(), data(in[2]),
                                                data(in[3]), data(out[0]), data(out[1]));
        },
        "backward reduce", true, kRtol, sum_tolerance(s));
    compare_cuda_with_cpu(
        {x, dy, mean, invstd, gamma, sums, sums_xhat}, {random_tensor(rng, s)},
        [count](auto& in, auto& out) {
          ops::batchnorm_backward_apply<float>(
              in[0].template view<float>(), in[1].template view<float>(), data(in[2]), data(in[3]),
              data(in[4]), data(in[5]), data(in[6]), count, out[0].template view<float>());
        },
        "backward apply", false, kRtol, kAtol);
  }
}

TEST_CASE("cuda batchnorm training forward and backward equal the cpu") {
  Rng rng(82);
  const ops::BatchNormParams params{.eps = 1e-3, .momentum = 0.03};  // YOLOv5's
  for (const Shape4& s : kShapes) {
    CAPTURE(s.str());
    const int64_t c = s.c;
    const Shape4 per_channel{1, c, 1, 1};
    Tensor x = random_tensor(rng, s, -2, 3), dy = random_tensor(rng, s, -1, 1);
    Tensor gamma = channel_values(rng, c, 0.5, 1.5), beta = channel_values(rng, c, -1, 1);
    Tensor running_mean = channel_values(rng, c, -0.5, 0.5);
    Tensor running_var = channel_values(rng, c, 0.5, 2);
    // Outputs y, running_mean, running_var, save_mean, save_invstd. The running statistics
    // are updated in place, so none is poisoned; the overwritten ones start random, which an
    // unwritten element would keep and fail on just the same.
    compare_cuda_with_cpu(
        {x, gamma, beta},
        {random_tensor(rng, s), running_mean, running_var, random_tensor(rng, per_channel),
         random_tensor(rng, per_channel)},
        [&](auto& in, auto& out) {
          ops::batchnorm_forward_train<float>(
              in[0].template view<float>(), data(in[1]), data(in[2]), params, data(out[1]),
              data(out[2]), data(out[3]), data(out[4]), out[0].template view<float>());
        },
        "forward train", false, kRtol, kAtol);

    // save_mean and save_invstd as the forward leaves them, from the CPU.
    Tensor save_mean = Tensor::empty(per_channel), save_invstd = Tensor::empty(per_channel);
    {
      Tensor y = Tensor::empty(s), rm = running_mean.to(Device::cpu()),
             rv = running_var.to(Device::cpu());
      ops::batchnorm_forward_train<float>(x.view<float>(), data(gamma), data(beta), params,
                                          data(rm), data(rv), data(save_mean), data(save_invstd),
                                          y.view<float>());
    }
    // dx, dgamma, dbeta start random and are accumulated into.
    compare_cuda_with_cpu(
        {x, dy, gamma, save_mean, save_invstd}, {random_tensor(rng, s)},
        [](auto& in, auto& out) {
          Tensor dgamma = Tensor::zeros(in[2].shape(), in[2].device());
          Tensor dbeta = Tensor::zeros(in[2].shape(), in[2].device());
          ops::batchnorm_backward_train<float>(
              in[0].template view<float>(), in[1].template view<float>(), data(in[2]), data(in[3]),
              data(in[4]), out[0].template view<float>(), data(dgamma), data(dbeta));
        },
        "backward train: dx", false, kRtol, kAtol);
    compare_cuda_with_cpu(
        {x, dy, gamma, save_mean, save_invstd},
        {random_tensor(rng, per_channel), random_tensor(rng, per_channel)},
        [](auto& in, auto& out) {
          Tensor dx = Tensor::zeros(in[0].shape(), in[0].device());
          ops::batchnorm_backward_train<float>(
              in[0].template view<float>(), in[1].template view<float>(), data(in[2]), data(in[3]),
              data(in[4]), dx.template view<float>(), data(out[0]), data(out[1]));
        },
        "backward train: dgamma, dbeta", false, kRtol, sum_tolerance(s));
  }
}

TEST_CASE("cuda batchnorm evaluation forward and backward equal the cpu") {
  Rng rng(83);
  const ops::BatchNormParams params{.eps = 1e-3, .momentum = 0.03};
  for (const Shape4& s : kShapes) {
    CAPTURE(s.str());
    const int64_t c = s.c;
    const Shape4 per_channel{1, c, 1, 1};
    Tensor x = random_tensor(rng, s, -2, 3), dy = random_tensor(rng, s, -1, 1);
    Tensor gamma = channel_values(rng, c, 0.5, 1.5), beta = channel_values(rng, c, -1, 1);
    Tensor running_mean = channel_values(rng, c, -0.5, 0.5);
    Tensor running_var = channel_values(rng, c, 0.5, 2);
    compare_cuda_with_cpu(
        {x, gamma, beta, running_mean, running_var}, {Tensor::empty(s)},
        [&](auto& in, auto& out) {
          ops::batchnorm_forward_eval<float>(in[0].template view<float>(), data(in[1]), data(in[2]),
                                             data(in[3]), data(in[4]), params,
                                             out[0].template view<float>());
        },
        "forward eval", true, kRtol, kAtol);
    compare_cuda_with_cpu(
        {x, dy, gamma, running_mean, running_var}, {random_tensor(rng, s)},
        [&](auto& in, auto& out) {
          Tensor dgamma = Tensor::zeros(in[2].shape(), in[2].device());
          Tensor dbeta = Tensor::zeros(in[2].shape(), in[2].device());
          ops::batchnorm_backward_eval<float>(
              in[0].template view<float>(), in[1].template view<float>(), data(in[2]), data(in[3]),
              data(in[4]), params, out[0].template view<float>(), data(dgamma), data(dbeta));
        },
        "backward eval: dx", false, kRtol, kAtol);
    compare_cuda_with_cpu(
        {x, dy, gamma, running_mean, running_var},
        {random_tensor(rng, per_channel), random_tensor(rng, per_channel)},
        [&](auto& in, auto& out) {
          Tensor dx = Tensor::zeros(in[0].shape(), in[0].device());
          ops::batchnorm_backward_eval<float>(
              in[0].template view<float>(), in[1].template view<float>(), data(in[2]), data(in[3]),
              data(in[4]), params, dx.template view<float>(), data(out[0]), data(out[1]));
        },
        "backward eval: dgamma, dbeta", false, kRtol, sum_tolerance(s));
  }
}

TEST_CASE("cuda fused batchnorm + silu equals the cpu's apply then silu") {
  Rng rng(84);
  for (const Shape4& s : kShapes) {
    CAPTURE(s.str());
    const int64_t c = s.c;
    Tensor x = random_tensor(rng, s, -2, 3);
    Tensor mean = channel_values(rng, c, -0.5, 0.5), invstd = channel_values(rng, c, 0.5, 2);
    Tensor gamma = channel_values(rng, c, 0.5, 1.5), beta = channel_values(rng, c, -1, 1);
    compare_cuda_with_cpu(
        {x, mean, invstd, gamma, beta}, {Tensor::empty(s)},
        [](auto& in, auto& out) {  // one kernel on the GPU, apply then silu on the CPU
          ops::batchnorm_silu_apply<float>(in[0].template view<float>(), data(in[1]), data(in[2]),
                                           data(in[3]), data(in[4]), out[0].template view<float>());
        },
        "batchnorm + silu", true, kRtol, kAtol);
  }
}

TEST_CASE("cuda batchnorm on channel slices equals the cpu") {
  Rng rng(85);
  const ops::BatchNormParams params{.eps = 1e-3, .momentum = 0.03};
  const Shape4 parent{3, 24, 9, 13};
  const Shape4 per_channel{1, 8, 1, 1};
  Tensor x = random_tensor(rng, parent, -2, 3), dy = random_tensor(rng, parent, -1, 1);
  Tensor gamma = channel_values(rng, 8, 0.5, 1.5), beta = channel_values(rng, 8, -1, 1);
  Tensor save_mean = channel_values(rng, 8, -0.5, 0.5),
         save_invstd = channel_values(rng, 8, 0.5, 2);
  compare_cuda_with_cpu(
      {x, gamma, beta},
      {random_tensor(rng, parent), Tensor::zeros(per_channel),
       Tensor::zeros(per_channel) /* running stats */},
      [&](auto& in, auto& out) {
        Tensor y = out[0].channels(16, 24);
        Tensor mean = Tensor::empty(per_channel, in[0].device());
        Tensor invstd = Tensor::empty(per_channel, in[0].device());
        ops::batchnorm_forward_train<float>(
            in[0].channels(4, 12).template view<float>(), data(in[1]), data(in[2]), params,
            data(out[1]), data(out[2]), data(mean), data(invstd), y.template view<float>());
      },
      "forward train on slices", false, kRtol, kAtol);
  compare_cuda_with_cpu(
      {x, dy, gamma, save_mean, save_invstd}, {random_tensor(rng, parent)},
      [&](auto& in, auto& out) {
        Tensor dx = out[0].channels(1, 9);
        Tensor dgamma = Tensor::zeros(per_channel, in[0].device());
        Tensor dbeta = Tensor::zeros(per_channel, in[0].device());
        ops::batchnorm_backward_train<float>(in[0].channels(4, 12).template view<float>(),
                                             in[1].channels(16, 24).template view<float>(),
                                             data(in[2]), data(in[3]), data(in[4]),
                                             dx.template view<float>(), data(dgamma), data(dbeta));
      },
      "backward train on slices", false, kRtol, kAtol);
}

TEST_CASE("cuda batchnorm moments stay accurate when the mean dwarfs the spread") {
  // x = 1000 + uniform noise of variance ~1: a float sum of squares minus count * mean^2
  // would cancel to garbage (its rounding, ~1000^2 * count * eps, exceeds the true M2 ~
  // count); Welford/Chan keeps M2 within 1e-3, the rounding of x itself being 6e-5.
  Rng rng(86);
  const Shape4 s{8, 4, 40, 40};
  std::vector<float> values = random_vector<float>(rng, s.numel(), -1.7, 1.7);
  for (float& v : values) v += 1000.0f;
  Tensor x = Tensor::from_vector(values, s);
  const Shape4 per_channel{1, 4, 1, 1};
  compare_cuda_with_cpu(
      {x}, {Tensor::empty(per_channel), Tensor::empty(per_channel)},
      [](auto& in, auto& out) {
        ops::batchnorm_moments<float>(in[0].template view<float>(), data(out[0]), data(out[1]));
      },
      "moments of a large-mean batch", true, 1e-3, 0.0);
}

TEST_CASE("cuda ConvBnSilu with the fused BN + SiLU equals the cpu layer") {
  const std::unique_ptr<dist::Communicator> one_rank = dist::make_single_rank_communicator();
  for (bool synced : {false, true})
    for (Mode mode : {Mode::train, Mode::eval}) {
      CAPTURE(synced);
      CAPTURE(mode == Mode::train);
      Rng rng(86);
      const Shape4 in_shape{3, 5, 11, 9};
      Tensor x = random_tensor(rng, in_shape, -2, 2);
      std::unique_ptr<ConvBnSilu> blocks[2];
      Tensor outputs[2], grad_inputs[2];
      std::vector<StateEntry> states[2];
      for (int d = 0; d < 2; ++d) {
        const Device device = d == 0 ? Device::cpu() : Device::cuda(0);
        std::mt19937_64 init(7);  // the same weights on both devices
        blocks[d] = std::make_unique<ConvBnSilu>(
            5, 6, 3, 2, -1, ops::BatchNormParams{.eps = 1e-3, .momentum = 0.03}, init, device);
        if (synced)
          blocks[d]->for_each_child([&](Module& child) {
            if (auto* bn = dynamic_cast<BatchNorm2d*>(&child)) bn->set_sync(one_rank.get());
          });
        blocks[d]->collect_state("", states[d]);
        // Running statistics away from their initial 0 and 1, so that eval uses them.
        Rng stats_rng(87);
        for (StateEntry& e : states[d])
          if (e.name == "bn.running_mean")
            e.value->copy_from(random_tensor(stats_rng, e.value->shape(), -0.3, 0.3).to(device));
          else if (e.name == "bn.running_var")
            e.value->copy_from(random_tensor(stats_rng, e.value->shape(), 0.5, 2).to(device));
        const Tensor input = x.to(device);
        const Shape4 out_shape = blocks[d]->output_shape(std::array{in_shape});
        outputs[d] = Tensor::empty(out_shape, device);
        if (device.is_cuda())
          cuda::fill_bytes(data(outputs[d]), 0xFF, size_t(outputs[d].numel()) * 4, 0);  // NaN
        blocks[d]->forward(std::span(&input, 1), outputs[d], mode);
        Rng grad_rng(88);
        const Tensor grad_output = random_tensor(grad_rng, out_shape, -1, 1).to(device);
        grad_inputs[d] = Tensor::zeros(in_shape, device);
        blocks[d]->backward(std::span(&input, 1), outputs[d], grad_output,
                            std::span(&grad_inputs[d], 1));
      }
      cuda::synchronize(0);
      check_close(outputs[1].to_vector<float>(), outputs[0].to_vector<float>(), kRtol, kAtol,
                  "ConvBnSilu output");
      check_close(grad_inputs[1].to_vector<float>(), grad_inputs[0].to_vector<float>(), kRtol,
                  kAtol, "ConvBnSilu input gradient");
      for (size_t i = 0; i < states[0].size(); ++i) {
        CAPTURE(states[0][i].name);
        if (states[0][i].value->dtype() == DType::f32)
          check_close(states[1][i].value->to_vector<float>(),
                      states[0][i].value->to_vector<float>(), kRtol, kAtol, "state");
        else
          CHECK(states[1][i].value->to_vector<int64_t>() ==
                states[0][i].value->to_vector<int64_t>());
        if (states[0][i].grad)  // sums over 3 x 6 x 5 values per channel (conv: more)
          check_close(states[1][i].grad->to_vector<float>(), states[0][i].grad->to_vector<float>(),
                      kRtol, 1e-4, "state gradient");
      }
    }
}

// tests/cuda/bf16_ops.cpp — the CUDA activation ops on bf16 views (mixed precision) against the
// CPU's, whose bf16 ops are the float reference on widened values with each stored result
// rounded to bf16 (kernels/ops.h): random bf16 inputs, channel-slice views where the graph has
// them, written outputs poisoned with NaN first (accumulated ones start random). Tolerances:
// values that are only moved or compared (pooling, upsampling forward) bit for bit; computed
// values within one bf16 step (kBf16Rtol, cuda_testing.h); per-channel float sums as the float
// BatchNorm tests hold them (tests/cuda/batchnorm.cpp); the convolutions within one bf16 step
// (with a bias on cuDNN's path, also half a step of the convolution before the bias).
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

Tensor written_bf16(Shape4 shape) { return Tensor::empty(shape, Device::cpu(), DType::bf16); }

float* data(Tensor& t) { return t.view<float>().data; }

Tensor channel_values(Rng& rng, int64_t c, double lo, double hi) {
  return random_tensor(rng, {1, c, 1, 1}, lo, hi);
}

}  // namespace

TEST_CASE("cuda bf16 silu, add, upsample and pooling equal the cpu's bf16 ops") {
  Rng rng(1611);
  const Shape4 parent{3, 8, 9, 11}, s{3, 4, 9, 11}, small{3, 4, 5, 6}, large{3, 4, 10, 12};
  const Tensor x = random_bf16_tensor(rng, parent), dy = random_bf16_tensor(rng, s);
  compare_cuda_with_cpu(
      {x}, {written_bf16(s)},
      [](auto& in, auto& out) {  // channels 2..6 of x: a strided input
        ops::silu_forward<bf16>(in[0].channels(2, 6).template view<bf16>(),
                                out[0].template view<bf16>());
      },
      "silu forward bf16", true, kBf16Rtol, kBf16Atol);
  compare_cuda_with_cpu(
      {x, dy}, {random_bf16_tensor(rng, parent)},
      [](auto& in, auto& out) {
        Tensor dx = out[0].channels(2, 6);
        ops::silu_backward<bf16>(in[0].channels(2, 6).template view<bf16>(),
                                 in[1].template view<bf16>(), dx.template view<bf16>());
      },
      "silu backward bf16", false, kBf16Rtol, kBf16Atol);
  compare_cuda_with_cpu(
      {x, random_bf16_tensor(rng, s)}, {written_bf16(s)},
      [](auto& in, auto& out) {
        ops::add_forward<bf16>(in[0].channels(4, 8).template view<bf16>(),
                               in[1].template view<bf16>(), out[0].template view<bf16>());
      },
      "add forward bf16", true, kBf16Rtol, kBf16Atol);
  compare_cuda_with_cpu(
      {dy}, {random_bf16_tensor(rng, s), random_bf16_tensor(rng, parent)},
      [](auto& in, auto& out) {
        Tensor db = out[1].channels(0, 4);
        ops::add_backward<bf16>(in[0].template view<bf16>(), out[0].template view<bf16>(),
                                db.template view<bf16>());
      },
      "add backward bf16", false, kBf16Rtol, kBf16Atol);

  const Tensor little = random_bf16_tensor(rng, small), big = random_bf16_tensor(rng, large);
  compare_cuda_with_cpu(
      {little}, {written_bf16(large)},
      [](auto& in, auto& out) {
        ops::upsample_nearest2x_forward<bf16>(in[0].template view<bf16>(),
                                              out[0].template view<bf16>());
      },
      "upsample forward bf16", true, 0, 0);
  compare_cuda_with_cpu(
      {big}, {random_bf16_tensor(rng, small)},
      [](auto& in, auto& out) {
        ops::upsample_nearest2x_backward<bf16>(in[0].template view<bf16>(),
                                               out[0].template view<bf16>());
      },
      "upsample backward bf16", false, kBf16Rtol, kBf16Atol);

  const ops::Pool2dParams sppf{5, 1, 2}, strided{3, 2, 1};
  for (const ops::Pool2dParams p : {sppf, strided}) {
    INFO("pool kernel " << p.kernel << " stride " << p.stride);
    const Shape4 pooled{s.n, s.c, ops::conv_out_size(s.h, p.kernel, p.stride, p.pad),
                        ops::conv_out_size(s.w, p.kernel, p.stride, p.pad)};
    compare_cuda_with_cpu(
        {x}, {written_bf16(pooled)},
        [p](auto& in, auto& out) {
          ops::maxpool2d_forward<bf16>(in[0].channels(2, 6).template view<bf16>(), p,
                                       out[0].template view<bf16>());
        },
        "maxpool forward bf16", true, 0, 0);
    compare_cuda_with_cpu(
        {x, random_bf16_tensor(rng, pooled)}, {random_bf16_tensor(rng, s)},
        [p](auto& in, auto& out) {
          ops::maxpool2d_backward<bf16>(in[0].channels(2, 6).template view<bf16>(),
                                        in[1].template view<bf16>(), p,
                                        out[0].template view<bf16>());
        },
        "maxpool backward bf16", false, kBf16Rtol, kBf16Atol);
  }
  compare_cuda_with_cpu(
      {x}, {written_bf16({s.n, 3 * s.c, s.h, s.w})},
      [sppf](auto& in, auto& out) {  // SPPF writes its three pools into slices of one tensor
        const int64_t c = in[0].shape().c / 2;
        Tensor y1 = out[0].channels(0, c), y2 = out[0].channels(c, 2 * c),
               y3 = out[0].channels(2 * c, 3 * c);
        ops::maxpool2d_chain3_forward<bf16>(in[0].channels(2, 6).template view<bf16>(), sppf,
                                            y1.template view<bf16>(), y2.template view<bf16>(),
                                            y3.template view<bf16>());
      },
      "maxpool chain3 forward bf16", true, 0, 0);
}

TEST_CASE("cuda bf16 batchnorm and batchnorm + silu ops equal the cpu's bf16 ops") {
  Rng rng(1612);
  const ops::BatchNormParams params{.eps = 1e-3, .momentum = 0.03};
  const double kSumRtol = 1e-4;
  for (const Shape4 s : {Shape4{2, 16, 33, 31}, Shape4{1, 8, 7, 5}}) {
    CAPTURE(s.str());
    const int64_t c = s.c, count = s.n * s.plane();
    const double sum_atol = 1e-6 * double(count);
    const Shape4 per_channel{1, c, 1, 1};
    const Tensor x = random_bf16_tensor(rng, s, -2, 3), dy = random_bf16_tensor(rng, s, -1, 1);
    const Tensor mean = channel_values(rng, c, -0.5, 0.5), invstd = channel_values(rng, c, 0.5, 2);
    const Tensor gamma = channel_values(rng, c, 0.5, 1.5), beta = channel_values(rng, c, -1, 1);
    const Tensor sums = channel_values(rng, c, -5, 5), sums_xhat = channel_values(rng, c, -5, 5);
    const Tensor running_mean = channel_values(rng, c, -0.5, 0.5);
    const Tensor running_var = channel_values(rng, c, 0.5, 2);

    compare_cuda_with_cpu(
        {x}, {Tensor::empty(per_channel), Tensor::empty(per_channel)},
        [](auto& in, auto& out) {
          ops::batchnorm_moments<bf16>(in[0].template view<bf16>(), data(out[0]), data(out[1]));
        },
        "moments bf16", true, kSumRtol, sum_atol);
    for (const bool silu : {false, true})
      compare_cuda_with_cpu(
          {x, mean, invstd, gamma, beta}, {written_bf16(s)},
          [silu](auto& in, auto& out) {
            auto apply = silu ? ops::batchnorm_silu_apply<bf16> : ops::batchnorm_apply<bf16>;
            apply(in[0].template view<bf16>(), data(in[1]), data(in[2]), data(in[3]), data(in[4]),
                  out[0].template view<bf16>());
          },
          silu ? "batchnorm + silu apply bf16" : "apply bf16", true, kBf16Rtol, kBf16Atol);
    compare_cuda_with_cpu(
        {x, dy, mean, invstd}, {Tensor::empty(per_channel), Tensor::empty(per_channel)},
        [](auto& in, auto& out) {
          ops::batchnorm_backward_reduce<bf16>(in[0].template view<bf16>(),
                                               in[1].template view<bf16>(), data(in[2]),
                                               data(in[3]), data(out[0]), data(out[1]));
        },
        "backward reduce bf16", true, kSumRtol, sum_atol);
    // SyncBatchNorm's two phases share dx as a workspace (kernels/ops.h): reduce gets one
    // (in[6]), and apply runs after a reduce on the same dx, whose local sums (in[8], in[9]) it
    // does not use.
    compare_cuda_with_cpu(
        {x, dy, mean, invstd, gamma, beta, written_bf16(s)},
        {Tensor::empty(per_channel), Tensor::empty(per_channel)},
        [](auto& in, auto& out) {
          ops::batchnorm_silu_backward_reduce<bf16>(
              in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]), data(in[3]),
              data(in[4]), data(in[5]), data(out[0]), data(out[1]), in[6].template view<bf16>());
        },
        "batchnorm + silu backward reduce bf16", true, kSumRtol, sum_atol);
    compare_cuda_with_cpu(
        {x, dy, mean, invstd, gamma, sums, sums_xhat}, {random_bf16_tensor(rng, s)},
        [count](auto& in, auto& out) {
          ops::batchnorm_backward_apply<bf16>(
              in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]), data(in[3]),
              data(in[4]), data(in[5]), data(in[6]), count, out[0].template view<bf16>());
        },
        "backward apply bf16", false, kBf16Rtol, kBf16Atol);
    compare_cuda_with_cpu(  // the fused backward ops write dx
        {x, dy, mean, invstd, gamma, beta, sums, sums_xhat, Tensor::empty(per_channel),
         Tensor::empty(per_channel)},
        {written_bf16(s)},
        [count](auto& in, auto& out) {
          ops::batchnorm_silu_backward_reduce<bf16>(
              in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]), data(in[3]),
              data(in[4]), data(in[5]), data(in[8]), data(in[9]), out[0].template view<bf16>());
          ops::batchnorm_silu_backward_apply<bf16>(
              in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]), data(in[3]),
              data(in[4]), data(in[5]), data(in[6]), data(in[7]), count,
              out[0].template view<bf16>());
        },
        "batchnorm + silu backward apply bf16", true, kBf16Rtol, kBf16Atol);

    // Training: y, the running statistics (updated in place, so nothing is poisoned: the
    // written outputs start random instead), save_mean and save_invstd.
    compare_cuda_with_cpu(
        {x, gamma, beta},
        {random_bf16_tensor(rng, s), running_mean, running_var, random_tensor(rng, per_channel),
         random_tensor(rng, per_channel)},
        [&](auto& in, auto& out) {
          ops::batchnorm_forward_train<bf16>(in[0].template view<bf16>(), data(in[1]), data(in[2]),
                                             params, data(out[1]), data(out[2]), data(out[3]),
                                             data(out[4]), out[0].template view<bf16>());
        },
        "forward train bf16", false, kBf16Rtol, kBf16Atol);
    // The backward ops from the statistics the CPU's forward leaves. dx starts random: the plain
    // ops add into it, the fused ones write it (an element they miss keeps its random value).
    Tensor save_mean = Tensor::empty(per_channel), save_invstd = Tensor::empty(per_channel);
    {
      Tensor rm = running_mean.to(Device::cpu()), rv = running_var.to(Device::cpu());
      ops::batchnorm_train_statistics<bf16>(x.view<bf16>(), params, data(rm), data(rv),
                                            data(save_mean), data(save_invstd));
    }
    for (const bool silu : {false, true}) {
      INFO((silu ? "batchnorm + silu" : "batchnorm") << " backward train bf16");
      compare_cuda_with_cpu(
          {x, dy, gamma, beta, save_mean, save_invstd},
          {random_bf16_tensor(rng, s), channel_values(rng, c, -1, 1),
           channel_values(rng, c, -1, 1)},
          [silu](auto& in, auto& out) {
            if (silu)
              ops::batchnorm_silu_backward_train<bf16>(
                  in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]),
                  data(in[3]), data(in[4]), data(in[5]), out[0].template view<bf16>(), data(out[1]),
                  data(out[2]));
            else
              ops::batchnorm_backward_train<bf16>(
                  in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]),
                  data(in[4]), data(in[5]), out[0].template view<bf16>(), data(out[1]),
                  data(out[2]));
          },
          "backward train bf16: dx, dgamma, dbeta", false, kBf16Rtol, sum_atol);
    }
    // Evaluation: forward with the running statistics, and both backward ops.
    compare_cuda_with_cpu(
        {x, gamma, beta, running_mean, running_var}, {written_bf16(s)},
        [&](auto& in, auto& out) {
          ops::batchnorm_forward_eval<bf16>(in[0].template view<bf16>(), data(in[1]), data(in[2]),
                                            data(in[3]), data(in[4]), params,
                                            out[0].template view<bf16>());
        },
        "forward eval bf16", true, kBf16Rtol, kBf16Atol);
    for (const bool silu : {false, true}) {
      INFO((silu ? "batchnorm + silu" : "batchnorm") << " backward eval bf16");
      compare_cuda_with_cpu(
          {x, dy, gamma, beta, running_mean, running_var},
          {random_bf16_tensor(rng, s), channel_values(rng, c, -1, 1),
           channel_values(rng, c, -1, 1)},
          [&, silu](auto& in, auto& out) {
            if (silu)
              ops::batchnorm_silu_backward_eval<bf16>(
                  in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]),
                  data(in[3]), data(in[4]), data(in[5]), params, out[0].template view<bf16>(),
                  data(out[1]), data(out[2]));
            else
              ops::batchnorm_backward_eval<bf16>(
                  in[0].template view<bf16>(), in[1].template view<bf16>(), data(in[2]),
                  data(in[4]), data(in[5]), params, out[0].template view<bf16>(), data(out[1]),
                  data(out[2]));
          },
          "backward eval bf16: dx, dgamma, dbeta", false, kBf16Rtol, sum_atol);
    }
  }
}

TEST_CASE("cuda bf16 convolutions equal the cpu's within one bf16 step, both paths") {
  Rng rng(1613);
  for (const cuda::ConvPath path : {cuda::ConvPath::cudnn, cuda::ConvPath::gemm})
    for (const ops::Conv2dParams p :
         {ops::Conv2dParams{1, 1, 1, 1}, ops::Conv2dParams{2, 2, 1, 1}}) {
      cuda::set_conv_path(path);
      INFO(std::string(path == cuda::ConvPath::cudnn ? "cudnn" : "gemm")
           << ", stride " << p.stride_h);
      const Shape4 parent{3, 12, 20, 18}, ws{16, 8, 3, 3};
      const Shape4 ys{3, 16, ops::conv_out_size(20, 3, p.stride_h, 1),
                      ops::conv_out_size(18, 3, p.stride_w, 1)};
      const Tensor x = random_bf16_tensor(rng, parent, -1, 1);
      const Tensor w = random_bf16_tensor(rng, ws, -1, 1), dy = random_bf16_tensor(rng, ys, -1, 1);
      const Tensor bias = random_tensor(rng, {1, 16, 1, 1}, -1, 1);
      // y, and the BN moments of what was stored (means within a bf16 step of the values' size,
      // M2 within a bf16 step of itself).
      const Shape4 per_channel{1, 16, 1, 1};
      auto forward = [&](auto& in, auto& out) {  // channels 2..10 of x: a strided input
        Tensor mean = Tensor::empty(per_channel, out[0].device()),
               m2 = Tensor::empty(per_channel, out[0].device());
        ops::conv2d_forward<bf16>(in[0].channels(2, 10).template view<bf16>(),
                                  in[1].template view<bf16>(),
                                  in.size() > 2 ? data(in[2]) : nullptr, p,
                                  out[0].template view<bf16>(), data(mean), data(m2));
        if (out.size() == 3) {
          out[1].copy_from(mean);
          out[2].copy_from(m2);
        }
      };
      compare_cuda_with_cpu({x, w}, {written_bf16(ys)}, forward, "conv2d forward bf16", true,
                            kBf16Rtol, kBf16Atol);
      // With a bias, cuDNN stores round(conv), and the bias is added to that and rounded again:
      // half a bf16 step of |conv| (at most |conv| / 256) beside the definition's one rounding
      // of conv + bias, and |conv| is far above |y| where the bias cancels it.
      Tensor conv = written_bf16(ys);
      ops::conv2d_forward<bf16>(x.channels(2, 10).view<bf16>(), w.view<bf16>(), nullptr, p,
                                conv.view<bf16>(), nullptr, nullptr);
      double largest_conv = 0;
      for (double v : conv.to_doubles()) largest_conv = std::max(largest_conv, std::abs(v));
      compare_cuda_with_cpu({x, w, bias}, {written_bf16(ys)}, forward,
                            "conv2d forward bf16 with a bias", true, kBf16Rtol,
                            kBf16Atol + largest_conv / 256);
      compare_cuda_with_cpu(
          {x, w, bias}, {written_bf16(ys), Tensor::empty(per_channel), Tensor::empty(per_channel)},
          forward, "conv2d forward bf16: moments", true, kBf16Rtol, 0.1);
      // dx starts from bf16 values (a gradient other layers added to).
      compare_cuda_with_cpu(
          {dy, w}, {random_bf16_tensor(rng, parent, -1, 1)},
          [&](auto& in, auto& out) {
            Tensor slice = out[0].channels(2, 10);
            ops::conv2d_backward_data<bf16>(in[0].template view<bf16>(),
                                            in[1].template view<bf16>(), p,
                                            slice.template view<bf16>());
          },
          "conv2d backward data bf16", false, kBf16Rtol, kBf16Atol);
      // Small starting values, so that the one-step tolerance is relative to the product's size.
      compare_cuda_with_cpu(
          {x, dy}, {random_tensor(rng, ws, -0.01, 0.01), random_tensor(rng, {1, 16, 1, 1})},
          [&](auto& in, auto& out) {
            ops::conv2d_backward_weight<bf16>(in[0].channels(2, 10).template view<bf16>(),
                                              in[1].template view<bf16>(), p,
                                              out[0].template view<float>(), data(out[1]));
          },
          "conv2d backward weight bf16 (dweight, dbias)", false, kBf16Rtol, kBf16Atol);
    }
  cuda::set_conv_path(cuda::ConvPath::cudnn);
}

// tests/cuda/conv2d_bf16.cpp — the CUDA bf16 convolutions (cuDNN on bf16 copies, tensor cores,
// float accumulation) against their CPU definitions (kernels/ops.h), on bf16-valued random
// inputs, a channel-slice input and output, outputs poisoned first. Tolerance: the two sum in
// different orders, so a result may land on the neighbouring bf16 — one bf16 step, 2^-7
// relative — plus what float order does near zero.
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {
constexpr double kBf16Rtol = 1.0 / 128, kBf16Atol = 2e-3;

Tensor bf16_valued(Rng& rng, Shape4 shape) {
  std::vector<float> values = random_vector<float>(rng, shape.numel(), -1, 1);
  for (float& v : values) v = round_to_bf16(v);
  return Tensor::from_vector(values, shape);
}
}  // namespace

TEST_CASE("cuda bf16 convolutions equal their cpu definitions within one bf16 step") {
  Rng rng(1606);
  for (const ops::Conv2dParams p : {ops::Conv2dParams{1, 1, 1, 1}, ops::Conv2dParams{2, 2, 1, 1}}) {
    const Shape4 parent{3, 12, 20, 18}, ws{16, 8, 3, 3};
    const Shape4 ys{3, 16, ops::conv_out_size(20, 3, p.stride_h, 1),
                    ops::conv_out_size(18, 3, p.stride_w, 1)};
    const Tensor x = bf16_valued(rng, parent), w = bf16_valued(rng, ws), dy = bf16_valued(rng, ys);
    const std::vector<float> bias = random_vector<float>(rng, 16);
    const Tensor bias_tensor = Tensor::from_vector(bias, {1, 16, 1, 1});
    INFO("stride " << p.stride_h);
    compare_cuda_with_cpu(
        {x, w, bias_tensor}, {Tensor::empty(ys)},
        [&](auto& in, auto& out) {  // channels 2..10 of x: a strided input
          ops::conv2d_forward_bf16(in[0].channels(2, 10).template view<float>(),
                                   in[1].template view<float>(), in[2].template view<float>().data,
                                   p, out[0].template view<float>());
        },
        "conv2d forward bf16", true, kBf16Rtol, kBf16Atol);
    // Gradients accumulate: dx starts from bf16 values, dweight and dbias from floats.
    const Tensor dx = bf16_valued(rng, parent);
    compare_cuda_with_cpu(
        {dy, w}, {dx},
        [&](auto& in, auto& out) {
          Tensor slice = out[0].channels(2, 10);
          ops::conv2d_backward_data_bf16(in[0].template view<float>(), in[1].template view<float>(),
                                         p, slice.template view<float>());
        },
        "conv2d backward data bf16", false, kBf16Rtol, kBf16Atol);
    // Small starting values, so that the one-step tolerance is relative to the product's size.
    const Tensor dweight =
        Tensor::from_vector(random_vector<float>(rng, ws.numel(), -0.01, 0.01), ws);
    const Tensor dbias = Tensor::from_vector(random_vector<float>(rng, 16), {1, 16, 1, 1});
    compare_cuda_with_cpu(
        {x, dy}, {dweight, dbias},
        [&](auto& in, auto& out) {
          ops::conv2d_backward_weight_bf16(
              in[0].channels(2, 10).template view<float>(), in[1].template view<float>(), p,
              out[0].template view<float>(), out[1].template view<float>().data);
        },
        "conv2d backward weight bf16", false, kBf16Rtol, kBf16Atol);
  }
}

// tools/bareyolo/demo.cpp — a per-pixel classifier trained from scratch on synthetic images, to
// show the kernels of kernels/ops.h working together: forward, backward and an SGD step.
//
// Task: for random RGB images, predict for every pixel whether the 3x3 neighbourhood is on
// average redder than it is green. Network (all ops from kernels/ops.h):
//   conv3x3(3->16) -> BN -> SiLU -> conv3x3(16->16) -> BN -> SiLU -> conv1x1(16->1, bias)
//   -> BCE-with-logits, averaged over pixels.
// The loss falls from about 0.69 (chance) as the network learns the rule.
#include "tools/bareyolo/demo.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/tensor.h"
#include "kernels/ops.h"

namespace bareyolo {

namespace {

// PyTorch's default convolution init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor random_conv_weight(int c_out, int c_in, int kernel, std::mt19937& rng) {
  std::vector<float> w(static_cast<size_t>(c_out * c_in * kernel * kernel));
  float bound = 1.0f / std::sqrt(static_cast<float>(c_in * kernel * kernel));
  std::uniform_real_distribution<float> init(-bound, bound);
  for (float& v : w) v = init(rng);
  return Tensor::from_vector(w, {c_out, c_in, kernel, kernel});
}

// Conv (no bias) + BatchNorm + SiLU, the building block YOLOv5 calls Conv.
struct ConvBnSilu {
  Tensor weight, grad_weight, gamma, beta, grad_gamma, grad_beta, running_mean, running_var;
  Tensor conv_out, bn_out, out, save_mean, save_invstd;
  ops::Conv2dParams params;

  ConvBnSilu(int c_in, int c_out, int kernel, std::mt19937& rng) {
    params.pad_h = params.pad_w = kernel / 2;
    weight = random_conv_weight(c_out, c_in, kernel, rng);
    grad_weight = Tensor::zeros(weight.shape());
    gamma = Tensor::from_vector(std::vector<float>(c_out, 1.0f), {1, c_out, 1, 1});
    beta = Tensor::zeros({1, c_out, 1, 1});
    grad_gamma = Tensor::zeros({1, c_out, 1, 1});
    grad_beta = Tensor::zeros({1, c_out, 1, 1});
    running_mean = Tensor::zeros({1, c_out, 1, 1});
    running_var = Tensor::from_vector(std::vector<float>(c_out, 1.0f), {1, c_out, 1, 1});
    save_mean = Tensor::zeros({1, c_out, 1, 1});
    save_invstd = Tensor::zeros({1, c_out, 1, 1});
  }

  const Tensor& forward(const Tensor& x) {
    Shape4 s = {x.shape().n, weight.shape().n, x.shape().h, x.shape().w};
    if (!(conv_out.shape() == s)) {
      conv_out = Tensor::empty(s);
      bn_out = Tensor::empty(s);
      out = Tensor::empty(s);
    }
    ops::conv2d_forward<float>(x.view<float>(), weight.view<float>(), nullptr, params,
                               conv_out.view<float>());
    ops::batchnorm_forward_train<float>(
        conv_out.view<float>(), gamma.view<float>().data, beta.view<float>().data, {},
        running_mean.view<float>().data, running_var.view<float>().data,
        save_mean.view<float>().data, save_invstd.view<float>().data, bn_out.view<float>());
    ops::silu_forward<float>(bn_out.view<float>(), out.view<float>());
    return out;
  }

  // Accumulates parameter gradients; returns dL/dx (freshly zeroed, then accumulated).
  Tensor backward(const Tensor& x, const Tensor& grad_out) {
    Tensor grad_bn = Tensor::zeros(out.shape()), grad_conv = Tensor::zeros(out.shape());
    ops::silu_backward<float>(bn_out.view<float>(), grad_out.view<float>(), grad_bn.view<float>());
    ops::batchnorm_backward_train<float>(
        conv_out.view<float>(), grad_bn.view<float>(), gamma.view<float>().data,
        save_mean.view<float>().data, save_invstd.view<float>().data, grad_conv.view<float>(),
        grad_gamma.view<float>().data, grad_beta.view<float>().data);
    ops::conv2d_backward_weight<float>(x.view<float>(), grad_conv.view<float>(), params,
                                       grad_weight.view<float>(), nullptr);
    Tensor grad_x = Tensor::zeros(x.shape());
    ops::conv2d_backward_data<float>(grad_conv.view<float>(), weight.view<float>(), params,
                                     grad_x.view<float>());
    return grad_x;
  }

  std::vector<std::pair<Tensor*, Tensor*>> parameters() {
    return {{&weight, &grad_weight}, {&gamma, &grad_gamma}, {&beta, &grad_beta}};
  }
};

// Plain SGD on one parameter, then its gradient is zeroed for the next step.
void sgd_step(Tensor& param, Tensor& grad, float learning_rate) {
  View<float> p = param.view<float>();
  View<float> g = grad.view<float>();
  for (int64_t i = 0; i < p.shape.numel(); ++i) p.data[i] -= learning_rate * g.data[i];
  grad.zero();
}

// A batch of random images and, per pixel, 1 where the 3x3 mean of red exceeds green's.
void make_batch(std::mt19937& rng, int batch, int size, Tensor& images, Tensor& labels) {
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch * 3 * size * size));
  for (float& v : x) v = pixel(rng);
  std::vector<float> y(static_cast<size_t>(batch * size * size));
  auto at = [&](int n, int c, int i, int j) { return x[((n * 3 + c) * size + i) * size + j]; };
  for (int n = 0; n < batch; ++n)
    for (int i = 0; i < size; ++i)
      for (int j = 0; j < size; ++j) {
        float red_minus_green = 0;
        for (int di = -1; di <= 1; ++di)
          for (int dj = -1; dj <= 1; ++dj) {
            int a = i + di, b = j + dj;
            if (a >= 0 && a < size && b >= 0 && b < size)
              red_minus_green += at(n, 0, a, b) - at(n, 1, a, b);
          }
        y[(n * size + i) * size + j] = red_minus_green > 0 ? 1.0f : 0.0f;
      }
  images = Tensor::from_vector(x, {batch, 3, size, size});
  labels = Tensor::from_vector(y, {batch, 1, size, size});
}

}  // namespace

double run_demo(const DemoOptions& options) {
  std::mt19937 rng(options.seed);
  ConvBnSilu block1(3, 16, 3, rng), block2(16, 16, 3, rng);
  Tensor head_weight = random_conv_weight(1, 16, 1, rng),
         head_grad = Tensor::zeros(head_weight.shape());
  Tensor head_bias = Tensor::zeros({1, 1, 1, 1}), head_bias_grad = Tensor::zeros({1, 1, 1, 1});

  double accuracy = 0;
  for (int step = 1; step <= options.steps; ++step) {
    Tensor images, labels;
    make_batch(rng, options.batch, options.image_size, images, labels);
    const Shape4 pixels = labels.shape();
    const double pixel_count = static_cast<double>(pixels.numel());

    // forward
    const Tensor& features = block2.forward(block1.forward(images));
    Tensor logits = Tensor::empty(pixels), loss = Tensor::empty(pixels);
    ops::conv2d_forward<float>(features.view<float>(), head_weight.view<float>(),
                               head_bias.view<float>().data, {}, logits.view<float>());
    ops::bce_with_logits_forward<float>(logits.view<float>(), labels.view<float>(), 1.0f,
                                        loss.view<float>());
    double loss_sum = 0, correct = 0;
    std::vector<float> logit_values = logits.to_vector<float>(),
                       label_values = labels.to_vector<float>();
    for (float v : loss.to_vector<float>()) loss_sum += v;
    for (size_t i = 0; i < logit_values.size(); ++i)
      correct += (logit_values[i] > 0) == (label_values[i] > 0.5f);
    accuracy = correct / pixel_count;

    // backward: d(mean loss)/d(loss_i) = 1 / pixel_count
    Tensor grad_loss =
        Tensor::from_vector(std::vector<float>(static_cast<size_t>(pixels.numel()),
                                               static_cast<float>(1.0 / pixel_count)),
                            pixels);
    Tensor grad_logits = Tensor::zeros(pixels), grad_features = Tensor::zeros(features.shape());
    ops::bce_with_logits_backward<float>(logits.view<float>(), labels.view<float>(), 1.0f,
                                         grad_loss.view<float>(), grad_logits.view<float>());
    ops::conv2d_backward_weight<float>(features.view<float>(), grad_logits.view<float>(), {},
                                       head_grad.view<float>(), head_bias_grad.view<float>().data);
    ops::conv2d_backward_data<float>(grad_logits.view<float>(), head_weight.view<float>(), {},
                                     grad_features.view<float>());
    block1.backward(images, block2.backward(block1.out, grad_features));

    // update
    sgd_step(head_weight, head_grad, options.learning_rate);
    sgd_step(head_bias, head_bias_grad, options.learning_rate);
    for (ConvBnSilu* block : {&block1, &block2})
      for (auto [param, grad] : block->parameters()) sgd_step(*param, *grad, options.learning_rate);

    if (step == 1 || step % 10 == 0 || step == options.steps)
      std::printf("step %4d/%d  loss %.4f  pixel accuracy %.3f\n", step, options.steps,
                  loss_sum / pixel_count, accuracy);
  }
  return accuracy;
}

}  // namespace bareyolo

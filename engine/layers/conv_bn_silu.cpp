// engine/layers/conv_bn_silu.cpp — see conv_bn_silu.h.
//
// Forward keeps the convolution output, which BN's backward reads. In training the convolution
// also gathers BN's moments of its output as it writes it (Conv2d::forward_with_moments), so
// BN's statistics need no pass over it; BN's apply and SiLU are one fused op
// (BatchNorm2d::forward_silu; one pass on a GPU), and BN's output, SiLU's input, is
// not kept: the fused backward normalises the kept convolution output again (a multiply-add per
// value, against a buffer the size of the layer's output held from forward to backward).
// Backward runs them in reverse, SiLU's backward inside BN's (BatchNorm2d::backward_silu),
// writing the gradient of the convolution's output (no zeroing pass: kernels/ops.h) into a
// slot of the backward scratch stack (engine/backward_scratch.h), held only during this call.
#include "engine/layers/conv_bn_silu.h"

#include <array>

#include "engine/backward_scratch.h"
#include "engine/tensor_factories.h"

namespace bareyolo {

ConvBnSilu::ConvBnSilu(int c_in, int c_out, int kernel, int stride, int pad,
                       ops::BatchNormParams bn, std::mt19937_64& rng, Device device, DType dtype)
    : conv_({.c_in = c_in, .c_out = c_out, .kernel = kernel, .stride = stride, .pad = pad}, rng,
            device, dtype),
      bn_(c_out, bn, device, dtype) {}

Shape4 ConvBnSilu::output_shape(std::span<const Shape4> inputs) const {
  return conv_.output_shape(inputs);
}

void ConvBnSilu::forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) {
  if (mode == Mode::train) {
    convolve_with_moments(inputs[0], output);
    bn_.forward_silu_train(conv_out_, moments_mean_, moments_m2_, output);
  } else {
    ensure_tensor(conv_out_, output_shape(std::array{inputs[0].shape()}), output);
    conv_.forward(inputs, conv_out_, mode);
    bn_.forward_silu(conv_out_, output, mode);
  }
}

void ConvBnSilu::convolve_with_moments(const Tensor& input, const Tensor& like) {
  const Shape4 shape = output_shape(std::array{input.shape()});
  ensure_tensor(conv_out_, shape, like);
  const Shape4 per_channel = {1, shape.c, 1, 1};
  ensure_tensor(moments_mean_, per_channel, conv_.weight());
  ensure_tensor(moments_m2_, per_channel, conv_.weight());
  conv_.forward_with_moments(input, conv_out_, moments_mean_, moments_m2_);
}

void ConvBnSilu::backward(std::span<const Tensor> inputs, const Tensor&, const Tensor& grad_output,
                          std::span<Tensor> grad_inputs, ops::GradientWrite write) {
  BackwardScratch scratch;
  Tensor grad_conv_out = scratch.uninitialized(conv_out_.shape(), conv_out_);
  bn_.backward_silu(conv_out_, grad_output, grad_conv_out);
  conv_.backward(inputs, conv_out_, grad_conv_out, grad_inputs, write);
}

void ConvBnSilu::forward_siblings(ConvBnSilu& a, ConvBnSilu& b, const Tensor& input,
                                  Tensor& output_a, Tensor& output_b, Mode mode) {
  if (mode != Mode::train) {
    a.forward(std::span(&input, 1), output_a, mode);
    b.forward(std::span(&input, 1), output_b, mode);
    return;
  }
  a.convolve_with_moments(input, output_a);
  b.convolve_with_moments(input, output_b);
  BatchNorm2d::forward_silu_train_together(std::array{
      BatchNorm2d::SiluTrainForward{a.bn_, a.conv_out_, a.moments_mean_, a.moments_m2_, output_a},
      BatchNorm2d::SiluTrainForward{b.bn_, b.conv_out_, b.moments_mean_, b.moments_m2_, output_b}});
}

void ConvBnSilu::backward_siblings(ConvBnSilu& a, const Tensor& grad_output_a, ConvBnSilu& b,
                                   const Tensor& grad_output_b, const Tensor& input,
                                   Tensor& grad_input, ops::GradientWrite write) {
  BackwardScratch scratch;
  Tensor grad_conv_out_a = scratch.uninitialized(a.conv_out_.shape(), a.conv_out_);
  Tensor grad_conv_out_b = scratch.uninitialized(b.conv_out_.shape(), b.conv_out_);
  BatchNorm2d::backward_silu_together(
      std::array{BatchNorm2d::SiluBackward{b.bn_, b.conv_out_, grad_output_b, grad_conv_out_b},
                 BatchNorm2d::SiluBackward{a.bn_, a.conv_out_, grad_output_a, grad_conv_out_a}});
  b.conv_.backward(std::span(&input, 1), b.conv_out_, grad_conv_out_b, std::span(&grad_input, 1),
                   write);
  a.conv_.backward(std::span(&input, 1), a.conv_out_, grad_conv_out_a, std::span(&grad_input, 1),
                   ops::GradientWrite::add);
}

void ConvBnSilu::collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
  conv_.collect_state(prefix + "conv.", state);
  bn_.collect_state(prefix + "bn.", state);
}

void ConvBnSilu::release_activations() {
  conv_out_ = Tensor();
  conv_.release_activations();
}

}  // namespace bareyolo

// engine/layers/conv2d.h — Conv2d: a convolution with an optional bias (groups 1, dilation 1),
// the module form of ops::conv2d_*. State: "weight" (c_out, c_in, k, k), "bias" (c_out).
// Its activations may be stored in the weights' dtype or, under mixed precision (float
// weights), in bf16 (kernels/ops.h says what a bf16 convolution computes).
#pragma once

#include <random>

#include "engine/module.h"

namespace bareyolo {

struct Conv2dOptions {
  int c_in = 0, c_out = 0, kernel = 1, stride = 1;
  int pad = -1;  // -1: kernel / 2, YOLOv5's autopad
  bool bias = false;
};

class Conv2d : public Module {
 public:
  // Weight and bias drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default.
  Conv2d(const Conv2dOptions& options, std::mt19937_64& rng, Device device = Device::cpu(),
         DType dtype = DType::f32);

  Shape4 output_shape(std::span<const Shape4> inputs) const override;
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override;
  void backward(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                std::span<Tensor> grad_inputs, ops::GradientWrite write) override;
  // forward, and batchnorm_moments of the output into mean and m2 ((1, c_out, 1, 1), in the
  // weights' dtype), gathered as the convolution writes it (ops::conv2d_forward).
  void forward_with_moments(const Tensor& input, Tensor& output, Tensor& mean, Tensor& m2);
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override;
  void release_activations() override {
    if (!weight_bf16_.kept) weight_bf16_.tensor = Tensor();
  }

  const Conv2dOptions& options() const { return options_; }
  const Tensor& weight() const { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  // ops::conv2d_forward; mean and m2 both null, or its moments' outputs.
  void forward_into(const Tensor& input, Tensor& output, Tensor* mean, Tensor* m2);

  Conv2dOptions options_;
  Tensor weight_, weight_grad_, bias_, bias_grad_;
  // Mixed precision (bf16 activations): the float weights rounded to bf16 (at the last forward,
  // or by the arena that keeps it), the operand of its convolution and of backward's. Bias and
  // gradients stay float.
  Bf16Copy weight_bf16_;
};

}  // namespace bareyolo

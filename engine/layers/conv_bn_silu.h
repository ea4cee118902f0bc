// engine/layers/conv_bn_silu.h — ConvBnSilu: convolution without bias, BatchNorm2d, SiLU.
// YOLOv5 calls this block `Conv`; its state names are "conv.weight" and "bn.*". Its activations
// are stored like its input's: in the parameters' dtype, or in bf16 under mixed precision.
#pragma once

#include "engine/layers/batchnorm2d.h"
#include "engine/layers/conv2d.h"

namespace bareyolo {

class ConvBnSilu : public Module {
 public:
  // kernel k, stride s, padding k / 2 (YOLOv5's autopad) unless `pad` >= 0.
  ConvBnSilu(int c_in, int c_out, int kernel, int stride, int pad, ops::BatchNormParams bn,
             std::mt19937_64& rng, Device device = Device::cpu(), DType dtype = DType::f32);

  Shape4 output_shape(std::span<const Shape4> inputs) const override;
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override;
  void backward(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                std::span<Tensor> grad_inputs, ops::GradientWrite write) override;
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override;
  void release_activations() override;
  void for_each_child(const std::function<void(Module&)>& visit) override {
    visit(conv_);
    visit(bn_);
  }

  int c_out() const { return conv_.options().c_out; }

  // Two layers that convolve the same input (C3's cv1 and cv2): forward() and backward() of
  // each, but with one SyncBatchNorm meeting for both instead of one each
  // (BatchNorm2d::forward_silu_train_together, backward_silu_together). Backward puts b's
  // gradient of the input into grad_input first (as `write` says), then adds a's, as b's
  // backward and then a's would.
  static void forward_siblings(ConvBnSilu& a, ConvBnSilu& b, const Tensor& input, Tensor& output_a,
                               Tensor& output_b, Mode mode);
  static void backward_siblings(ConvBnSilu& a, const Tensor& grad_output_a, ConvBnSilu& b,
                                const Tensor& grad_output_b, const Tensor& input,
                                Tensor& grad_input, ops::GradientWrite write);

 private:
  // Training's convolution: conv_out_ and this rank's BN moments of it.
  void convolve_with_moments(const Tensor& input, const Tensor& like);

  Conv2d conv_;
  BatchNorm2d bn_;
  Tensor conv_out_;  // kept from forward for backward
  // Training: this rank's BN moments of conv_out_, which the convolution gathers (per channel, in
  // the parameters' dtype).
  Tensor moments_mean_, moments_m2_;
};

}  // namespace bareyolo

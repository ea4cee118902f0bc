// engine/layers/conv_bn_silu.h — ConvBnSilu: convolution without bias, BatchNorm2d, SiLU.
// YOLOv5 calls this block `Conv`; its state names are "conv.weight" and "bn.*".
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
                std::span<Tensor> grad_inputs) override;
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override;
  void release_activations() override;
  // Rounds the BN + SiLU output and BN's gradient to the convolution (mixed_precision.h).
  void set_mixed_precision(bool on) override {
    mixed_precision_ = on;
    conv_.set_mixed_precision(on);
  }
  void for_each_child(const std::function<void(Module&)>& visit) override {
    visit(conv_);
    visit(bn_);
  }

  int c_out() const { return conv_.options().c_out; }

 private:
  Conv2d conv_;
  BatchNorm2d bn_;
  Tensor conv_out_;  // kept from forward for backward
  bool mixed_precision_ = false;
};

}  // namespace bareyolo

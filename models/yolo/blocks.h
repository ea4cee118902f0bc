// models/yolo/blocks.h — YOLOv5's composite blocks, built from ConvBnSilu (YOLOv5's `Conv`):
//
//   Bottleneck(c1, c2, shortcut, e)  cv1 1x1 -> cv2 3x3, plus the input when shortcut and
//                                    c1 == c2
//   C3(c1, c2, n, shortcut)          cv3(concat[m(cv1(x)), cv2(x)]), m = n Bottlenecks(e=1)
//   SPPF(c1, c2, k)                  cv2(concat[x1, pool(x1), pool^2(x1), pool^3(x1)]),
//                                    x1 = cv1(x), pool = max-pool k, stride 1, pad k/2
//
// Their concatenations are zero-copy: the producers write into channel slices of one buffer,
// and backward reads the slices of its gradient. State names follow YOLOv5's registration
// order (C3: cv1, cv2, cv3, m.0...; SPPF: cv1, cv2).
#pragma once

#include <memory>
#include <vector>

#include "engine/layers/conv_bn_silu.h"

namespace bareyolo::models {

// What every block's convolutions share: initialisation stream, BN settings, device, dtype.
struct BlockContext {
  std::mt19937_64& rng;
  ops::BatchNormParams bn;
  Device device;
  DType dtype;

  std::unique_ptr<ConvBnSilu> conv(int c_in, int c_out, int kernel, int stride = 1) const {
    return std::make_unique<ConvBnSilu>(c_in, c_out, kernel, stride, -1, bn, rng, device, dtype);
  }
};

class Bottleneck : public Module {
 public:
  Bottleneck(int c_in, int c_out, bool shortcut, double expansion, const BlockContext& context);

  Shape4 output_shape(std::span<const Shape4> inputs) const override;
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override;
  void backward(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                std::span<Tensor> grad_inputs, ops::GradientWrite write) override;
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override;
  void release_activations() override;
  void for_each_child(const std::function<void(Module&)>& visit) override;

 private:
  std::unique_ptr<ConvBnSilu> cv1_, cv2_;
  bool add_input_;
  Tensor hidden_;
};

class C3 : public Module {
 public:
  C3(int c_in, int c_out, int repeats, bool shortcut, const BlockContext& context);

  Shape4 output_shape(std::span<const Shape4> inputs) const override;
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override;
  void backward(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                std::span<Tensor> grad_inputs, ops::GradientWrite write) override;
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override;
  void release_activations() override;
  void for_each_child(const std::function<void(Module&)>& visit) override;

 private:
  int hidden_channels_;
  std::unique_ptr<ConvBnSilu> cv1_, cv2_, cv3_;
  std::vector<std::unique_ptr<Bottleneck>> m_;
  // stages_[0] = cv1(x); stages_[i + 1] = m_[i](stages_[i]), the last being a slice of cat_.
  std::vector<Tensor> stages_;
  Tensor cat_;
};

class SPPF : public Module {
 public:
  SPPF(int c_in, int c_out, int kernel, const BlockContext& context);

  Shape4 output_shape(std::span<const Shape4> inputs) const override;
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override;
  void backward(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                std::span<Tensor> grad_inputs, ops::GradientWrite write) override;
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override;
  void release_activations() override;
  void for_each_child(const std::function<void(Module&)>& visit) override;

 private:
  int hidden_channels_;
  ops::Pool2dParams pool_;
  std::unique_ptr<ConvBnSilu> cv1_, cv2_;
  Tensor cat_;  // [x1, pool(x1), pool^2(x1), pool^3(x1)]
};

}  // namespace bareyolo::models

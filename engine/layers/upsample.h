// engine/layers/upsample.h — Upsample: nearest-neighbour x2 (YOLOv5's nn.Upsample(None, 2,
// 'nearest')). No state.
#pragma once

#include "engine/module.h"

namespace bareyolo {

class Upsample : public Module {
 public:
  Shape4 output_shape(std::span<const Shape4> inputs) const override;
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override;
  void backward(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                std::span<Tensor> grad_inputs, ops::GradientWrite write) override;
};

}  // namespace bareyolo

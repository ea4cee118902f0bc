// engine/layers/upsample.cpp — see upsample.h.
#include "engine/layers/upsample.h"

#include <stdexcept>

#include "engine/tensor.h"
#include "kernels/ops.h"

namespace bareyolo {

Shape4 Upsample::output_shape(std::span<const Shape4> inputs) const {
  if (inputs.size() != 1) throw std::invalid_argument("Upsample takes one input");
  return {inputs[0].n, inputs[0].c, 2 * inputs[0].h, 2 * inputs[0].w};
}

void Upsample::forward(std::span<const Tensor> inputs, Tensor& output, Mode) {
  with_activation_type(output.dtype(), [&]<class T>() {
    ops::upsample_nearest2x_forward<T>(inputs[0].view<T>(), output.view<T>());
  });
}

void Upsample::backward(std::span<const Tensor>, const Tensor&, const Tensor& grad_output,
                        std::span<Tensor> grad_inputs, ops::GradientWrite write) {
  with_activation_type(grad_output.dtype(), [&]<class T>() {
    ops::upsample_nearest2x_backward<T>(grad_output.view<T>(), grad_inputs[0].view<T>(), write);
  });
}

}  // namespace bareyolo

// engine/mixed_precision.h — bf16 mixed precision (--amp) as the modules see it.
//
// Mixed precision keeps what must be exact in float (master weights, BatchNorm statistics, the
// loss, the optimizer, gradient accumulation) and stores in bf16 what is read once and forgotten
// (activations, activation gradients) or multiplied on tensor cores (a convolution's weights and
// operands). bf16 has float's range, so no loss scaling is needed, and 8 significant bits.
//
// On float tensors the storage is emulated: wherever a bf16 tensor would be written, the float
// values are rounded to bf16 in place (ops::round_to_bf16_in_place), and arithmetic stays float
// — the numerics of bf16 storage without its bytes. Where it happens:
//   - every tensor passed between graph nodes, forward and backward, and the graph input
//     (engine/graph.h);
//   - a convolution's weights (a rounded copy; the master stays float), and what the bf16
//     convolutions of kernels/ops.h store: the output, the gradient passed to the input, the
//     weight gradient's product before the float weight gradient adds it (engine/layers/conv2d.h;
//     on a GPU these run on cuDNN's bf16 tensor cores);
//   - ConvBnSilu's BN + SiLU output and the gradient BN passes to the convolution.
// Sums inside composite modules (C3's residual adds) stay float.
#pragma once

#include "engine/tensor.h"
#include "kernels/ops.h"

namespace bareyolo {

// When `on`: `t`'s values (a float tensor, any layout) become the nearest bf16 values.
inline void store_as_bf16(bool on, const Tensor& t) {
  if (on && t.defined()) ops::round_to_bf16_in_place(Tensor(t).view<float>());
}

}  // namespace bareyolo

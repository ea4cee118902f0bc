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
//   - a convolution's weights (a rounded copy; the master stays float), its output and the
//     gradient it passes to its input (engine/layers/conv2d.h);
//   - ConvBnSilu's BN + SiLU output and the gradient BN passes to the convolution.
// Sums inside composite modules (C3's residual adds) stay float. A weight gradient is float
// products of bf16 operands accumulated in float, as cuDNN computes it with float accumulation.
#pragma once

#include "engine/tensor.h"
#include "kernels/ops.h"

namespace bareyolo {

// When `on`: `t`'s values (a float tensor, any layout) become the nearest bf16 values.
inline void store_as_bf16(bool on, const Tensor& t) {
  if (on && t.defined()) ops::round_to_bf16_in_place(Tensor(t).view<float>());
}

}  // namespace bareyolo

// kernels/cuda/cuda_ops.h — the ops of kernels/ops.h that have a CUDA kernel, for float.
// Same meaning and conventions as there; callers go through kernels/ops.h, which routes
// views on a GPU here. Kernels run on the device's compute stream (runtime.h).
#pragma once

#include "kernels/view.h"

namespace bareyolo::cuda {

void silu_forward(View<const float> x, View<float> y);
void silu_backward(View<const float> x, View<const float> dy, View<float> dx);
void add_forward(View<const float> a, View<const float> b, View<float> y);
void add_backward(View<const float> dy, View<float> da, View<float> db);

}  // namespace bareyolo::cuda

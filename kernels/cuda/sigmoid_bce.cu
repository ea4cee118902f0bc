// kernels/cuda/sigmoid_bce.cu — the pointwise pieces of the loss on the GPU: sigmoid and
// BCE-with-logits, forward and backward; the scalar formulas are the CPU reference's
// (kernels/activation.h, with kernels/cpu/elementwise.cpp):
//   sigmoid  s = 1 / (1 + e^-x)                       ds: dx += dy * s (1 - s)
//   BCE      l = (1 - t) x + (w t + 1 - t) softplus(-x), softplus(-x) = max(-x, 0) + log1p(e^-|x|)
//            dl/dx = (1 - t) s - w t (1 - s)
#include "kernels/activation.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

struct Sigmoid {
  __device__ float operator()(float x) const { return sigmoid(x); }
};

struct SigmoidBackward {
  View<const float> y, dy;
  View<float> dx;
  __device__ void operator()(int64_t n, int64_t i) const {
    dx.image(n)[i] += sigmoid_gradient_from_output(y.image(n)[i], dy.image(n)[i]);
  }
};

struct BceForward {
  View<const float> x, target;
  float pos_weight;
  View<float> loss;
  __device__ void operator()(int64_t n, int64_t i) const {
    loss.image(n)[i] = bce(x.image(n)[i], target.image(n)[i], pos_weight);
  }
};

struct BceBackward {
  View<const float> x, target;
  float pos_weight;
  View<const float> dloss;
  View<float> dx;
  __device__ void operator()(int64_t n, int64_t i) const {
    dx.image(n)[i] += dloss.image(n)[i] * bce_grad(x.image(n)[i], target.image(n)[i], pos_weight);
  }
};

}  // namespace

void sigmoid_forward(View<const float> x, View<float> y) { launch_map(x, y, Sigmoid{}); }
void sigmoid_backward(View<const float> y, View<const float> dy, View<float> dx) {
  launch_pointwise(y.shape, y.device, all_dense(y, dy, dx), SigmoidBackward{y, dy, dx});
}
void bce_with_logits_forward(View<const float> x, View<const float> target, float pos_weight,
                             View<float> loss) {
  launch_pointwise(x.shape, x.device, all_dense(x, target, loss),
                   BceForward{x, target, pos_weight, loss});
}
void bce_with_logits_backward(View<const float> x, View<const float> target, float pos_weight,
                              View<const float> dloss, View<float> dx) {
  launch_pointwise(x.shape, x.device, all_dense(x, target, dloss, dx),
                   BceBackward{x, target, pos_weight, dloss, dx});
}

}  // namespace bareyolo::cuda

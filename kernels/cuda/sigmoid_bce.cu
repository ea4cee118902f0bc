// kernels/cuda/sigmoid_bce.cu — the pointwise pieces of the loss on the GPU: sigmoid and
// BCE-with-logits, forward and backward; same formulas as kernels/cpu/elementwise.cpp:
//   sigmoid  s = 1 / (1 + e^-x)                       ds: dx += dy * s (1 - s)
//   BCE      l = (1 - t) x + (w t + 1 - t) softplus(-x), softplus(-x) = max(-x, 0) + log1p(e^-|x|)
//            dl/dx = (1 - t) s - w t (1 - s)
// expf and log1pf (not the fast intrinsics) keep results within a few ulps of the CPU.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

__device__ float sigmoid_of(float x) { return 1.0f / (1.0f + expf(-x)); }

struct Sigmoid {
  __device__ float operator()(float x) const { return sigmoid_of(x); }
};

struct SigmoidBackward {
  View<const float> y, dy;
  View<float> dx;
  __device__ void operator()(int64_t n, int64_t i) const {
    const float s = y.image(n)[i];
    dx.image(n)[i] += dy.image(n)[i] * s * (1.0f - s);
  }
};

struct BceForward {
  View<const float> x, target;
  float pos_weight;
  View<float> loss;
  __device__ void operator()(int64_t n, int64_t i) const {
    const float logit = x.image(n)[i], t = target.image(n)[i];
    const float softplus_neg = fmaxf(-logit, 0.0f) + log1pf(expf(-fabsf(logit)));
    loss.image(n)[i] = (1.0f - t) * logit + (pos_weight * t + 1.0f - t) * softplus_neg;
  }
};

struct BceBackward {
  View<const float> x, target;
  float pos_weight;
  View<const float> dloss;
  View<float> dx;
  __device__ void operator()(int64_t n, int64_t i) const {
    const float s = sigmoid_of(x.image(n)[i]), t = target.image(n)[i];
    dx.image(n)[i] += dloss.image(n)[i] * ((1.0f - t) * s - pos_weight * t * (1.0f - s));
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

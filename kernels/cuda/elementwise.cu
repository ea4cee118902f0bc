// kernels/cuda/elementwise.cu — SiLU and add, forward and backward, on the GPU, for float and
// bf16 storage (S): values are widened to float, computed, and each stored result narrowed
// back (kernels/bf16.h), so the bf16 ops are the float ones stored in bf16 (kernels/ops.h).
//
// pointwise.cuh's grid-stride kernel walks every element of an NCHW view as (image, offset in
// image), so channel-slice views (batch_stride > c*h*w) work exactly as on the CPU. Each op is
// a small functor over the CPU reference's scalar formulas (kernels/activation.h).
#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

template <class S>
struct SiluForward {
  View<const S> x;
  View<S> y;
  __device__ void operator()(int64_t n, int64_t i) const {
    y.image(n)[i] = narrow<S>(silu(widen(x.image(n)[i])));
  }
};

template <class S>
struct SiluBackward {
  View<const S> x, dy;
  View<S> dx;
  __device__ void operator()(int64_t n, int64_t i) const {
    S& grad = dx.image(n)[i];
    grad = narrow<S>(widen(grad) + silu_gradient(widen(x.image(n)[i]), widen(dy.image(n)[i])));
  }
};

template <class S>
struct AddForward {
  View<const S> a, b;
  View<S> y;
  __device__ void operator()(int64_t n, int64_t i) const {
    y.image(n)[i] = narrow<S>(widen(a.image(n)[i]) + widen(b.image(n)[i]));
  }
};

template <class S>
struct AddBackward {
  View<const S> dy;
  View<S> da, db;
  __device__ void operator()(int64_t n, int64_t i) const {
    const float g = widen(dy.image(n)[i]);
    S& grad_a = da.image(n)[i];
    S& grad_b = db.image(n)[i];
    grad_a = narrow<S>(widen(grad_a) + g);
    grad_b = narrow<S>(widen(grad_b) + g);
  }
};

}  // namespace

template <class S>
void silu_forward(View<const S> x, View<S> y) {
  launch_pointwise(x.shape, x.device, all_dense(x, y), SiluForward<S>{x, y});
}
template <class S>
void silu_backward(View<const S> x, View<const S> dy, View<S> dx) {
  launch_pointwise(x.shape, x.device, all_dense(x, dy, dx), SiluBackward<S>{x, dy, dx});
}
template <class S>
void add_forward(View<const S> a, View<const S> b, View<S> y) {
  launch_pointwise(a.shape, a.device, all_dense(a, b, y), AddForward<S>{a, b, y});
}
template <class S>
void add_backward(View<const S> dy, View<S> da, View<S> db) {
  launch_pointwise(dy.shape, dy.device, all_dense(dy, da, db), AddBackward<S>{dy, da, db});
}

#define BAREYOLO_INSTANTIATE_ELEMENTWISE(S)                              \
  template void silu_forward<S>(View<const S>, View<S>);                 \
  template void silu_backward<S>(View<const S>, View<const S>, View<S>); \
  template void add_forward<S>(View<const S>, View<const S>, View<S>);   \
  template void add_backward<S>(View<const S>, View<S>, View<S>);
BAREYOLO_INSTANTIATE_ELEMENTWISE(float)
BAREYOLO_INSTANTIATE_ELEMENTWISE(bf16)

}  // namespace bareyolo::cuda

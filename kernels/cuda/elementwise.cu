// kernels/cuda/elementwise.cu — SiLU and add, forward and backward, on the GPU, for float and
// bf16 storage (S): values are widened to float, computed, and each stored result narrowed
// back (kernels/bf16.h), so the bf16 ops are the float ones stored in bf16 (kernels/ops.h).
//
// pointwise.cuh's grid-stride kernel walks every element as (image, offset in image) in the lead
// view's order, so channel-slice views (batch_stride > c*h*w) and channels-last views, in any mix,
// work exactly as on the CPU (kOpsTakingChannelsLastOnCuda lists these ops). Each op is a small
// functor over the CPU reference's scalar formulas (kernels/activation.h).
#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

// Each functor holds its views and the order its lead view (the first) counts elements in
// (pointwise.cuh): any mix of layouts and slices works, and views packed alike run flat.

template <class S>
struct SiluForward {
  View<const S> x;
  View<S> y;
  ElementOrder order = ElementOrder::of(x);
  __device__ void operator()(int64_t n, int64_t i) const {
    element(y, order, n, i) = narrow<S>(silu(widen(element(x, order, n, i))));
  }
};

template <class S>
struct SiluBackward {
  View<const S> x, dy;
  View<S> dx;
  ElementOrder order = ElementOrder::of(x);
  __device__ void operator()(int64_t n, int64_t i) const {
    S& grad = element(dx, order, n, i);
    grad = narrow<S>(widen(grad) + silu_gradient(widen(element(x, order, n, i)),
                                                 widen(element(dy, order, n, i))));
  }
};

template <class S>
struct AddForward {
  View<const S> a, b;
  View<S> y;
  ElementOrder order = ElementOrder::of(a);
  __device__ void operator()(int64_t n, int64_t i) const {
    element(y, order, n, i) =
        narrow<S>(widen(element(a, order, n, i)) + widen(element(b, order, n, i)));
  }
};

template <class S>
struct AddBackward {
  View<const S> dy;
  View<S> da, db;
  ElementOrder order = ElementOrder::of(dy);
  __device__ void operator()(int64_t n, int64_t i) const {
    const float g = widen(element(dy, order, n, i));
    S& grad_a = element(da, order, n, i);
    S& grad_b = element(db, order, n, i);
    grad_a = narrow<S>(widen(grad_a) + g);
    grad_b = narrow<S>(widen(grad_b) + g);
  }
};

}  // namespace

template <class S>
void silu_forward(View<const S> x, View<S> y) {
  launch_pointwise(x.shape, x.device, all_packed_alike(x, y), SiluForward<S>{x, y});
}
template <class S>
void silu_backward(View<const S> x, View<const S> dy, View<S> dx) {
  launch_pointwise(x.shape, x.device, all_packed_alike(x, dy, dx), SiluBackward<S>{x, dy, dx});
}
template <class S>
void add_forward(View<const S> a, View<const S> b, View<S> y) {
  launch_pointwise(a.shape, a.device, all_packed_alike(a, b, y), AddForward<S>{a, b, y});
}
template <class S>
void add_backward(View<const S> dy, View<S> da, View<S> db) {
  launch_pointwise(dy.shape, dy.device, all_packed_alike(dy, da, db), AddBackward<S>{dy, da, db});
}

#define BAREYOLO_INSTANTIATE_ELEMENTWISE(S)                              \
  template void silu_forward<S>(View<const S>, View<S>);                 \
  template void silu_backward<S>(View<const S>, View<const S>, View<S>); \
  template void add_forward<S>(View<const S>, View<const S>, View<S>);   \
  template void add_backward<S>(View<const S>, View<S>, View<S>);
BAREYOLO_INSTANTIATE_ELEMENTWISE(float)
BAREYOLO_INSTANTIATE_ELEMENTWISE(bf16)

}  // namespace bareyolo::cuda

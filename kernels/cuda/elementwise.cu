// kernels/cuda/elementwise.cu — SiLU and add, forward and backward, on the GPU, for float and
// bf16 storage (S): values are widened to float, computed, and each stored result narrowed
// back (kernels/bf16.h), so the bf16 ops are the float ones stored in bf16 (kernels/ops.h).
//
// Each op is its formula once, over the CPU reference's scalar functions (kernels/activation.h),
// run by pointwise.cuh's launch_elementwise: 16 bytes at a time where every view is packed in
// the lead view's layout and aligned, else element by element as (image, offset in image) in the
// lead view's order, so channel-slice views (batch_stride > c*h*w) and channels-last views, in any
// mix, work exactly as on the CPU (kOpsTakingChannelsLastOnCuda lists these ops).
#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

// The formulas, in float (pointwise.cuh's Elementwise narrows each result to S once).
struct SiluForward {  // in: x; out: y
  __device__ void operator()(const float (&in)[1], float (&out)[1]) const { out[0] = silu(in[0]); }
};
struct SiluBackward {  // in: x, dy, dx; out: dx (added to)
  __device__ void operator()(const float (&in)[3], float (&out)[1]) const {
    out[0] = in[2] + silu_gradient(in[0], in[1]);
  }
};
struct AddForward {  // in: a, b; out: y
  __device__ void operator()(const float (&in)[2], float (&out)[1]) const {
    out[0] = in[0] + in[1];
  }
};
struct AddBackward {  // in: dy, da, db; out: da, db (each added to)
  __device__ void operator()(const float (&in)[3], float (&out)[2]) const {
    out[0] = in[1] + in[0];
    out[1] = in[2] + in[0];
  }
};

}  // namespace

template <class S>
void silu_forward(View<const S> x, View<S> y) {
  launch_elementwise(Elementwise<S, 1, 1, SiluForward>{{x}, {y}, {}});
}
template <class S>
void silu_backward(View<const S> x, View<const S> dy, View<S> dx) {
  launch_elementwise(Elementwise<S, 3, 1, SiluBackward>{{x, dy, View<const S>(dx)}, {dx}, {}});
}
template <class S>
void add_forward(View<const S> a, View<const S> b, View<S> y) {
  launch_elementwise(Elementwise<S, 2, 1, AddForward>{{a, b}, {y}, {}});
}
template <class S>
void add_backward(View<const S> dy, View<S> da, View<S> db) {
  // (da and db are apart: ops::add_backward runs one gradient for both as two add_forwards.)
  launch_elementwise(
      Elementwise<S, 3, 2, AddBackward>{{dy, View<const S>(da), View<const S>(db)}, {da, db}, {}});
}

#define BAREYOLO_INSTANTIATE_ELEMENTWISE(S)                              \
  template void silu_forward<S>(View<const S>, View<S>);                 \
  template void silu_backward<S>(View<const S>, View<const S>, View<S>); \
  template void add_forward<S>(View<const S>, View<const S>, View<S>);   \
  template void add_backward<S>(View<const S>, View<S>, View<S>);
BAREYOLO_INSTANTIATE_ELEMENTWISE(float)
BAREYOLO_INSTANTIATE_ELEMENTWISE(bf16)

}  // namespace bareyolo::cuda

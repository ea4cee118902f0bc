// kernels/cuda/layout.cu — copy_elements on the GPU: a copy between views of any layout, for
// float and bf16 storage (S); same meaning as kernels/cpu/layout.cpp.
//
// One thread per element, numbered in NCHW order (image, channel, pixel): reads and writes go
// through each view's strides (View::at), so the same kernel converts NCHW to channels last, back,
// or copies a channel slice of either. Bits are copied, never converted.
#include "kernels/bf16.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

template <class S>
struct CopyElements {
  View<const S> x;
  View<S> y;
  ElementOrder order{false, x.shape.c, x.shape.plane()};  // NCHW's: (channel, pixel)
  __device__ void operator()(int64_t n, int64_t i) const {
    const ElementOrder::Place place = order.place(i);
    y.at(n, place.c, place.p) = x.at(n, place.c, place.p);
  }
};

}  // namespace

template <class S>
void copy_elements(View<const S> x, View<S> y) {
  // The (image, offset) path of launch_pointwise: offset i is (channel, pixel) in NCHW order.
  launch_pointwise(x.shape, x.device, /*all_dense=*/false, CopyElements<S>{x, y});
}

template void copy_elements<float>(View<const float>, View<float>);
template void copy_elements<bf16>(View<const bf16>, View<bf16>);

}  // namespace bareyolo::cuda

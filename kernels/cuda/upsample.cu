// kernels/cuda/upsample.cu — nearest-neighbour x2 upsampling on the GPU, forward and
// backward, for float and bf16 storage (S); same meaning as kernels/cpu/shape_ops.cpp.
//
// One thread per INPUT element in both directions: forward reads x once and writes its 2x2
// block (two pairs of neighbours, so a warp writes two contiguous runs of 64 floats), backward
// reads the 2x2 block of dy and adds its sum into dx in the CPU's order
// (dx + (((top-left + top-right) + bottom-left) + bottom-right)), or writes the sum (a dx written
// over), so dx matches bit for bit (bf16: summed in float, the result rounded once, as the CPU's
// definition does).
#include "kernels/bf16.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

template <class S>
struct UpsampleForward {
  View<const S> x;
  View<S> y;
  int64_t width;  // of x
  __device__ void operator()(int64_t n, int64_t i) const {
    // Element i of image n of x is (channel plane p, row r, column c); its block in y starts at
    // row 2r, column 2c of plane p, whose rows are 2 * width long.
    const int64_t row = i / width, column = i % width;  // row counts over all planes
    const S v = x.image(n)[i];                          // a copy: exact in any storage
    S* top = y.image(n) + (2 * row) * (2 * width) + 2 * column;
    top[0] = v;
    top[1] = v;
    top[2 * width] = v;
    top[2 * width + 1] = v;
  }
};

template <class S>
struct UpsampleBackward {
  View<const S> dy;
  View<S> dx;
  int64_t width;  // of dx
  bool add;       // dx += the block's sum, else dx = it (dx not read)
  __device__ void operator()(int64_t n, int64_t i) const {
    const int64_t row = i / width, column = i % width;
    const S* top = dy.image(n) + (2 * row) * (2 * width) + 2 * column;
    const S* bottom = top + 2 * width;
    S& grad = dx.image(n)[i];
    const float sum = widen(top[0]) + widen(top[1]) + widen(bottom[0]) + widen(bottom[1]);
    grad = narrow<S>(add ? widen(grad) + sum : sum);
  }
};

// Channels last (or any mix of layouts): one thread per input element counted in x's (dx's)
// memory order, its 2x2 block in y (dy) reached through the views' strides; the same sums in the
// same order as above.
// An element of a small image `width` wide at `place`: its channel c, its pixel p, and the pixel
// of the big image where its 2x2 block starts (its four: top, top + 1, below, below + 1).
struct BlockOf {
  int64_t c, p, top, below;
  __device__ BlockOf(ElementOrder::Place place, int64_t width)
      : c(place.c),
        p(place.p),
        top(2 * (p / width) * (2 * width) + 2 * (p % width)),
        below(top + 2 * width) {}
};

template <class S>
struct UpsampleForwardStrided {
  View<const S> x;
  View<S> y;
  ElementOrder order = ElementOrder::of(x);
  __device__ void operator()(int64_t n, int64_t i) const {
    const BlockOf b(order.place(i), x.shape.w);
    const S v = x.at(n, b.c, b.p);
    y.at(n, b.c, b.top) = v;
    y.at(n, b.c, b.top + 1) = v;
    y.at(n, b.c, b.below) = v;
    y.at(n, b.c, b.below + 1) = v;
  }
};

template <class S>
struct UpsampleBackwardStrided {
  View<const S> dy;
  View<S> dx;
  bool add;
  ElementOrder order = ElementOrder::of(dx);
  __device__ void operator()(int64_t n, int64_t i) const {
    const BlockOf b(order.place(i), dx.shape.w);
    const float sum = widen(dy.at(n, b.c, b.top)) + widen(dy.at(n, b.c, b.top + 1)) +
                      widen(dy.at(n, b.c, b.below)) + widen(dy.at(n, b.c, b.below + 1));
    S& grad = dx.at(n, b.c, b.p);
    grad = narrow<S>(add ? widen(grad) + sum : sum);
  }
};

}  // namespace

// Rows of consecutive planes follow each other in memory, so "row r of the image" (over all
// planes, r < c * h) maps to rows 2r and 2r + 1 of the output image: plane p's row k is image
// row p * h + k, and its output rows 2k, 2k + 1 of plane p are image rows p * 2h + 2k (+1).
// The same holds across the images of dense views, which then run as one flat range. A call with
// a channels-last view takes the strided functors.
template <class S>
void upsample_nearest2x_forward(View<const S> x, View<S> y) {
  if (x.channels_last() || y.channels_last())
    return launch_pointwise(x.shape, x.device, false, UpsampleForwardStrided<S>{x, y});
  launch_pointwise(x.shape, x.device, all_dense(x, y), UpsampleForward<S>{x, y, x.shape.w});
}

template <class S>
void upsample_nearest2x_backward(View<const S> dy, View<S> dx, ops::GradientWrite write) {
  const bool add = write == ops::GradientWrite::add;
  if (dy.channels_last() || dx.channels_last())
    return launch_pointwise(dx.shape, dx.device, false, UpsampleBackwardStrided<S>{dy, dx, add});
  launch_pointwise(dx.shape, dx.device, all_dense(dy, dx),
                   UpsampleBackward<S>{dy, dx, dx.shape.w, add});
}

#define BAREYOLO_INSTANTIATE_UPSAMPLE(S)                               \
  template void upsample_nearest2x_forward<S>(View<const S>, View<S>); \
  template void upsample_nearest2x_backward<S>(View<const S>, View<S>, ops::GradientWrite);
BAREYOLO_INSTANTIATE_UPSAMPLE(float)
BAREYOLO_INSTANTIATE_UPSAMPLE(bf16)

}  // namespace bareyolo::cuda

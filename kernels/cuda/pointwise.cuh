// kernels/cuda/pointwise.cuh — the launcher the pointwise CUDA kernels share (loss, optimizer,
// bf16): a grid-stride loop that calls op(image, offset in image) for every element of a shape,
// on the device's compute stream; and launch_map for the one-input maps.
//
// When every view of the call is dense, the caller says so and the loop runs over one flat
// index (image 0, offset = index): no 64-bit division per element, which is most of the cost
// of a memory-bound kernel's index arithmetic. Strided views (channel slices, batch_stride >
// c*h*w) take the (image, offset) path.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/view.h"

namespace bareyolo::cuda {

template <bool kFlat, class Op>
__global__ void pointwise_loop(int64_t total, int64_t per_image, Op op) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (kFlat)
      op(0, index);
    else
      op(index / per_image, index % per_image);
  }
}

// Runs op over every element of `shape` on `device`'s compute stream. `all_dense`: every view
// the op touches is dense, so image(0)[i] reaches every element.
template <class Op>
void launch_pointwise(const Shape4& shape, const Device& device, bool all_dense, Op op) {
  const int64_t total = shape.numel();
  if (total == 0) return;
  constexpr int threads = 256;
  // A few waves of blocks; the grid-stride loop covers the rest.
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 8192);
  const cudaStream_t stream = stream_of(device);
  if (all_dense)
    pointwise_loop<true><<<unsigned(blocks), threads, 0, stream>>>(total, total, op);
  else
    pointwise_loop<false><<<unsigned(blocks), threads, 0, stream>>>(total, shape.image_numel(), op);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

// True when every view is dense.
template <class... Views>
bool all_dense(const Views&... views) {
  return (views.dense() && ...);
}

// ---- kernels that take either layout -----------------------------------------------------------

// The order in which a kernel that takes views of either layout counts an image's elements: its
// lead view's memory order (NCHW: channel by channel; channels last: pixel by pixel), so that
// neighbouring threads touch neighbouring memory in the lead view and every view laid out alike.
struct ElementOrder {
  bool channels_last = false;
  int64_t channels = 0, pixels = 0;

  template <class T>
  __host__ __device__ static ElementOrder of(const View<T>& lead) {
    return {lead.channels_last(), lead.shape.c, lead.shape.plane()};
  }

  // Element i of an image, counted in this order, as its channel c and pixel p (one division).
  struct Place {
    int64_t c, p;
  };
  __device__ Place place(int64_t i) const {
    if (channels_last) {
      const int64_t p = i / channels;
      return {i - p * channels, p};
    }
    const int64_t c = i / pixels;
    return {c, i - c * pixels};
  }
};

// Element i, counted in `order`, of image n of v, whatever v's layout: at offset i where v is
// laid out in that order with no gaps inside an image (an NCHW channel slice qualifies: its
// channels' planes follow each other), else through v's strides (a channels-last slice, or a
// view of the other layout), which costs a division.
template <class T>
__device__ T& element(const View<T>& v, const ElementOrder& order, int64_t n, int64_t i) {
  if (v.channels_last() == order.channels_last &&
      (!order.channels_last || v.pixel_stride == v.shape.c))
    return v.image(n)[i];
  const ElementOrder::Place place = order.place(i);
  return v.at(n, place.c, place.p);
}

// True when every view is packed in the first one's layout: then offset i < numel of image 0
// reaches the same element of each (launch_pointwise's flat path, for element-by-element ops).
template <class First, class... Views>
bool all_packed_alike(const First& first, const Views&... views) {
  return first.packed() &&
         ((views.packed() && views.channels_last() == first.channels_last()) && ...);
}

// y = fn(x), element by element (x and y may be the same view, of either layout): the one-input
// maps.
template <class In, class Out, class Fn>
struct MapEach {
  View<const In> x;
  View<Out> y;
  Fn fn;
  ElementOrder order = ElementOrder::of(x);
  __device__ void operator()(int64_t n, int64_t i) const {
    element(y, order, n, i) = fn(element(x, order, n, i));
  }
};

template <class In, class Out, class Fn>
void launch_map(View<const In> x, View<Out> y, Fn fn) {
  launch_pointwise(x.shape, x.device, all_packed_alike(x, y), MapEach<In, Out, Fn>{x, y, fn});
}

}  // namespace bareyolo::cuda

// kernels/cuda/pointwise.cuh — the launcher the pointwise CUDA kernels share (loss, optimizer,
// bf16): a grid-stride loop that calls op(image, offset in image) for every element of a shape,
// on the device's compute stream; launch_map for the one-input maps; and launch_elementwise,
// which walks views packed alike 16 bytes at a time.
//
// When every view of the call is dense, the caller says so and the loop runs over one flat
// index (image 0, offset = index): no 64-bit division per element, which is most of the cost
// of a memory-bound kernel's index arithmetic. Strided views (channel slices, batch_stride >
// c*h*w) take the (image, offset) path.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/bf16.h"
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

// ---- 16 bytes at a time -----------------------------------------------------------------------
// A memory-bound kernel reaches the device's bandwidth only with wide loads: one 16-byte load
// per thread (4 floats, 8 bf16) rather than one 2- or 4-byte load per element.

template <class S>
constexpr int kPerVector = 16 / int(sizeof(S));

template <class S>
struct alignas(16) Vector {
  S value[kPerVector<S>];
};
template <class S>
__device__ Vector<S> load_vector(const S* p) {
  Vector<S> vector;
  *reinterpret_cast<uint4*>(&vector) = *reinterpret_cast<const uint4*>(p);
  return vector;
}
template <class S>
__device__ void store_vector(S* p, const Vector<S>& vector) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&vector);
}

template <class T>
bool vector_aligned(const View<T>& view) {
  return reinterpret_cast<uintptr_t>(view.data) % 16 == 0;
}

// An elementwise op of kIn inputs and kOut outputs over views of storage S, its formula once, in
// float: formula(const float (&in)[kIn], float (&out)[kOut]); each result is narrowed to S once
// (kernels/bf16.h). An output may be an input too (a gradient added to: list it in both).
template <class S, int kIn, int kOut, class Formula>
struct Elementwise {
  View<const S> in[kIn];
  View<S> out[kOut];
  Formula formula;
  ElementOrder order = ElementOrder::of(in[0]);

  // Element i of image n, in any layout (launch_pointwise).
  __device__ void operator()(int64_t n, int64_t i) const {
    float a[kIn], r[kOut];
    for (int j = 0; j < kIn; ++j) a[j] = widen(element(in[j], order, n, i));
    formula(a, r);
    for (int j = 0; j < kOut; ++j) element(out[j], order, n, i) = narrow<S>(r[j]);
  }

  // The vector at flat element offset e of views packed alike (all of it loaded, then stored).
  __device__ void vector(int64_t e) const {
    Vector<S> a[kIn], r[kOut];
    for (int j = 0; j < kIn; ++j) a[j] = load_vector(in[j].data + e);
    for (int k = 0; k < kPerVector<S>; ++k) {
      float x[kIn], y[kOut];
      for (int j = 0; j < kIn; ++j) x[j] = widen(a[j].value[k]);
      formula(x, y);
      for (int j = 0; j < kOut; ++j) r[j].value[k] = narrow<S>(y[j]);
    }
    for (int j = 0; j < kOut; ++j) store_vector(out[j].data + e, r[j]);
  }
};

// Every whole vector of `total` elements, then the few elements past the last (one a thread).
template <class S, class Op>
__global__ void vector_loop(int64_t total, Op op) {
  const int64_t vectors = total / kPerVector<S>;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t v = first; v < vectors; v += int64_t(gridDim.x) * blockDim.x)
    op.vector(v * kPerVector<S>);
  if (const int64_t rest = vectors * kPerVector<S> + first; rest < total) op(0, rest);
}

// Runs `op` over its views' elements: 16 bytes at a time where every view is packed in the
// first one's layout and 16-byte aligned (one flat range), else element by element through the
// views' strides (channel slices, mixed layouts).
template <class S, int kIn, int kOut, class Formula>
void launch_elementwise(const Elementwise<S, kIn, kOut, Formula>& op) {
  const View<const S>& lead = op.in[0];
  bool packed_alike = lead.packed(), aligned = true;
  auto look_at = [&](const auto& v) {
    packed_alike = packed_alike && v.packed() && v.channels_last() == lead.channels_last();
    aligned = aligned && vector_aligned(v);
  };
  for (const View<const S>& v : op.in) look_at(v);
  for (const View<S>& v : op.out) look_at(v);
  if (!packed_alike || !aligned) {
    launch_pointwise(lead.shape, lead.device, packed_alike, op);
    return;
  }
  const int64_t total = lead.shape.numel();
  if (total == 0) return;
  constexpr int threads = 256;
  const int64_t vectors = std::max<int64_t>(total / kPerVector<S>, 1);
  const int64_t blocks = std::min<int64_t>((vectors + threads - 1) / threads, 8192);
  vector_loop<S><<<unsigned(blocks), threads, 0, stream_of(lead.device)>>>(total, op);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

}  // namespace bareyolo::cuda

// kernels/view.h — the vocabulary every kernel speaks: where memory lives (Device) and how
// a block of activations, indexed (n, c, h, w), is laid out in it (View).
//
// A View is not owning. Image i of a view starts at data + i * batch_stride; within it, pixel
// p = y * w + x of channel c is at c * channel_stride() + p * pixel_stride:
//   NCHW           pixel_stride 1: a channel's h*w pixels are contiguous, planes one after
//                  another (channel_stride h*w): YOLOv5's layout, and every CPU kernel's;
//   channels last  (NHWC) pixel_stride >= c: a pixel's channels are contiguous (channel_stride
//                  1), what a GPU's tensor-core convolutions read fastest.
// A channel slice [c0, c1) of a batch is a view with data advanced by c0 * channel_stride()
// and the parent's strides (batch_stride beyond c*h*w; in channels last also pixel_stride
// beyond c), which is how Concat avoids copies. Where the two layouts coincide (one channel,
// or one pixel) a tensor is NCHW (engine/tensor.h), so pixel_stride != 1 means channels last.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

// Index arithmetic below is also used inside CUDA kernels.
#ifdef __CUDACC__
#define BAREYOLO_HOST_DEVICE __host__ __device__
#else
#define BAREYOLO_HOST_DEVICE
#endif

namespace bareyolo {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int ordinal) { return {DeviceKind::cuda, ordinal}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

struct Shape4 {
  int64_t n = 0, c = 0, h = 0, w = 0;

  BAREYOLO_HOST_DEVICE int64_t plane() const { return h * w; }
  // Where NCHW and channels last put every element in the same place (at most one channel, or
  // one pixel): such a shape is NCHW, whatever layout was asked for.
  BAREYOLO_HOST_DEVICE bool layouts_coincide() const { return c <= 1 || plane() <= 1; }
  BAREYOLO_HOST_DEVICE int64_t image_numel() const { return c * h * w; }
  BAREYOLO_HOST_DEVICE int64_t numel() const { return n * c * h * w; }
  bool operator==(const Shape4&) const = default;
  std::string str() const {
    return "(" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(h) + "," +
           std::to_string(w) + ")";
  }
};

template <class T>
struct View {
  T* data = nullptr;
  Shape4 shape;
  int64_t batch_stride = 0;  // elements from image i to image i+1 (>= shape.image_numel())
  Device device;
  int64_t pixel_stride = 1;  // elements from pixel p to p+1 of a channel: 1 in NCHW

  BAREYOLO_HOST_DEVICE bool channels_last() const { return pixel_stride != 1; }
  BAREYOLO_HOST_DEVICE int64_t channel_stride() const {
    return channels_last() ? 1 : shape.plane();
  }
  BAREYOLO_HOST_DEVICE T* image(int64_t i) const { return data + i * batch_stride; }
  // Channel c's plane of image i: NCHW views only (its pixels are contiguous there).
  BAREYOLO_HOST_DEVICE T* channel(int64_t i, int64_t c) const {
    return image(i) + c * shape.plane();
  }
  // The element (i, c, pixel p = y * w + x), in either layout.
  BAREYOLO_HOST_DEVICE T& at(int64_t i, int64_t c, int64_t p) const {
    return image(i)[c * channel_stride() + p * pixel_stride];
  }
  // True when the whole view is one dense NCHW block of shape.numel() elements.
  bool dense() const {
    return !channels_last() && (shape.n <= 1 || batch_stride == shape.image_numel());
  }
  // True when the view is one block of shape.numel() elements in its own layout (NCHW or
  // channels last): no gaps between images or, in channels last, between pixels.
  BAREYOLO_HOST_DEVICE bool packed() const {
    return (shape.n <= 1 || batch_stride == shape.image_numel()) &&
           (!channels_last() || pixel_stride == shape.c);
  }
  bool empty() const { return data == nullptr; }
  // A mutable view converts to a read-only one (of the same element type only).
  template <class U = T>
  requires(!std::is_const_v<U> && std::is_same_v<U, T>) operator View<const U>() const {
    return {data, shape, batch_stride, device, pixel_stride};
  }
};

// A dense view over `count` elements laid out as (1, 1, 1, count): the form flat buffers
// (losses, parameter vectors) take when they go through the elementwise ops.
template <class T>
View<T> flat_view(T* data, int64_t count, Device device = Device::cpu()) {
  return {data, {1, 1, 1, count}, count, device};
}

// A dense NCHW view.
template <class T>
View<T> dense_view(T* data, Shape4 shape, Device device = Device::cpu()) {
  return {data, shape, shape.image_numel(), device};
}

}  // namespace bareyolo

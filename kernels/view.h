// kernels/view.h — the vocabulary every kernel speaks: where memory lives (Device) and how
// an NCHW block of activations is laid out in it (View).
//
// A View is not owning. Image i of a view starts at data + i * batch_stride and holds
// c*h*w contiguous elements (channel planes one after another). batch_stride may exceed
// c*h*w: a channel slice [c0, c1) of a batch is then a view with data advanced by c0*h*w
// and the parent's batch_stride, which is how Concat avoids copies.
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

  BAREYOLO_HOST_DEVICE T* image(int64_t i) const { return data + i * batch_stride; }
  BAREYOLO_HOST_DEVICE T* channel(int64_t i, int64_t c) const {
    return image(i) + c * shape.plane();
  }
  // True when the whole view is one dense block of shape.numel() elements.
  bool dense() const { return shape.n <= 1 || batch_stride == shape.image_numel(); }
  bool empty() const { return data == nullptr; }
  // A mutable view converts to a read-only one (of the same element type only).
  template <class U = T>
  requires(!std::is_const_v<U> && std::is_same_v<U, T>) operator View<const U>() const {
    return {data, shape, batch_stride, device};
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

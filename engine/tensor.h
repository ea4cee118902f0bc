// engine/tensor.h — Tensor: an (n, c, h, w) block of one dtype on one device, in NCHW or
// channels last (kernels/view.h), sharing its Storage.
//
// A Tensor is a View plus ownership: `storage` keeps the memory alive, `offset` says where in
// it the first element is, `batch_stride` how far apart images are, `pixel_stride` which layout
// it has. Slicing channels or images returns a Tensor on the same storage (no copy) — the
// producer of a Concat input writes straight into its channel slice, and a gradient can be a
// view into an all-reduce bucket. Whatever the layout, a tensor's values as the host reads or
// writes them in bulk (to_vector, from_vector) are in NCHW order: layout is how the device
// keeps them, never what they mean.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/source_location.h"
#include "kernels/view.h"

namespace bareyolo {

// f32 is what the engine trains in; f64 is what gradient checks run in; i64 holds counters
// (BatchNorm's num_batches_tracked); u8 holds small indices (each parameter element's optimizer
// group); bf16 (kernels/bf16.h) is mixed precision's storage format: gradient buckets on the
// wire, weights files. f16 is a name only: storage holds it, nothing converts it.
enum class DType : uint8_t { f32, f64, i64, f16, bf16, u8 };

// How a tensor's elements lie in memory (kernels/view.h). A tensor with one channel or one pixel
// is NCHW whatever it was asked for: both layouts put its elements in the same places.
enum class Layout : uint8_t { nchw, channels_last };
const char* layout_name(Layout layout);
// The layout a tensor of `shape` made in `layout` has: NCHW where the two coincide.
Layout layout_for(const Shape4& shape, Layout layout);

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}

// One allocation on one device: 64-byte aligned host memory, or device memory — or memory
// someone else owns (a shared-memory segment), which the Storage then only points to.
class Storage {
 public:
  Storage(size_t bytes, Device device, SourceLocation where);
  // Not owned: `data` must outlive the Storage and every tensor over it.
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool owned_ = true;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage

  // `where`: the caller, named by the step guard (kernels/step_guard.h) should the allocation or
  // copy happen inside a training step.
  static Tensor empty(Shape4 shape, Device device = Device::cpu(), DType dtype = DType::f32,
                      SourceLocation where = SourceLocation::current());
  static Tensor zeros(Shape4 shape, Device device = Device::cpu(), DType dtype = DType::f32,
                      SourceLocation where = SourceLocation::current());
  // The same in `layout`.
  static Tensor empty(Shape4 shape, Device device, DType dtype, Layout layout,
                      SourceLocation where = SourceLocation::current());
  // A dense tensor holding `values` (shape.numel() of them), on `device`.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape4 shape,
                            Device device = Device::cpu(),
                            SourceLocation where = SourceLocation::current());

  bool defined() const { return storage_ != nullptr; }
  const Shape4& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  int64_t numel() const { return shape_.numel(); }
  int64_t batch_stride() const { return batch_stride_; }
  int64_t offset() const { return offset_; }  // in elements from the start of the storage
  int64_t pixel_stride() const { return pixel_stride_; }
  Layout layout() const { return pixel_stride_ == 1 ? Layout::nchw : Layout::channels_last; }
  // One dense NCHW block of numel() elements.
  bool dense() const {
    return layout() == Layout::nchw && (shape_.n <= 1 || batch_stride_ == shape_.image_numel());
  }
  // One block of numel() elements in its own layout (dense, or channels last without gaps).
  bool packed() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // A view of a dense tensor with another shape of the same element count.
  Tensor reshape(Shape4 shape) const;
  // A packed view of `shape` in `layout` over the first shape.numel() elements of this dense
  // tensor (a buffer lent to tensors of several sizes, one at a time).
  Tensor prefix(Shape4 shape, Layout layout = Layout::nchw) const;
  // Zero-copy views: channels [begin, end) of every image; images [begin, end).
  Tensor channels(int64_t begin, int64_t end) const;
  Tensor images(int64_t begin, int64_t end) const;

  // The kernels' view of this tensor; T must match dtype().
  template <class T>
  View<T> view();
  template <class T>
  View<const T> view() const;

  // Copies src (same shape, any device, any layout) into this tensor's elements, in this
  // tensor's layout.
  void copy_from(const Tensor& src, SourceLocation where = SourceLocation::current());
  // A dense copy on `device`.
  Tensor to(Device device, SourceLocation where = SourceLocation::current()) const;
  // This tensor on `device`: itself (no copy) when it is there already, else to(device).
  Tensor on(Device device, SourceLocation where = SourceLocation::current()) const {
    return this->device() == device ? *this : to(device, where);
  }
  // Every element set to zero (bytes set to 0), on the tensor's device. Not for a channel slice
  // of a channels-last tensor (its elements are not in blocks): throws.
  void zero();
  // Dense host copy of the elements, image after image; T must match dtype(). A host read: the
  // step guard refuses it inside a training step.
  template <class T>
  std::vector<T> to_vector(SourceLocation where = SourceLocation::current()) const;
  // The same, converted to double from any numeric dtype but f16.
  std::vector<double> to_doubles(SourceLocation where = SourceLocation::current()) const;
  // Copies src (same shape, same device, any layout) into this tensor's elements, converting
  // its dtype (and layout): f32 to bf16 rounds to nearest (ties to even), bf16 to f32 is exact; the
  // same dtype copies. Other pairs throw.
  void convert_from(const Tensor& src);
  // A copy in `dtype`, on the same device and in the same layout, converted as convert_from does.
  Tensor converted(DType dtype) const;

 private:
  template <class T>
  void require_dtype(const char* what) const;
  char* byte_pointer() const;
  // copy_from between tensors of one device whose elements are not in matching blocks.
  void copy_elements_from(const Tensor& src);

  std::shared_ptr<Storage> storage_;
  Shape4 shape_;
  int64_t batch_stride_ = 0;
  int64_t offset_ = 0;
  int64_t pixel_stride_ = 1;
  DType dtype_ = DType::f32;
};

// Calls fn.template operator()<T>() with T the C++ type of a floating dtype.
template <class Fn>
void with_float_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      fn.template operator()<float>();
      return;
    case DType::f64:
      fn.template operator()<double>();
      return;
    default:
      throw std::invalid_argument(std::string("no kernels for dtype ") + dtype_name(dtype));
  }
}

// Calls fn.template operator()<T>() with T the C++ type a floating dtype's activations are stored
// in: float, double, or bf16 (mixed precision; its ops compute in float: ComputeType<bf16>).
template <class Fn>
void with_activation_type(DType dtype, Fn&& fn) {
  if (dtype == DType::bf16) return fn.template operator()<bf16>();
  with_float_type(dtype, fn);
}

// A dense tensor as one flat (1, 1, 1, numel) view: optimizers do not care about shapes.
template <class T>
View<T> flat_tensor_view(Tensor& t) {
  View<T> v = t.view<T>();
  return flat_view(v.data, v.shape.numel(), v.device);
}

}  // namespace bareyolo

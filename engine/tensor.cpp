// engine/tensor.cpp — storage allocation, zero-copy slicing, and copies between devices.
#include "engine/tensor.h"

#include <cstring>

#include "kernels/device_memory.h"
#include "kernels/ops.h"
#include "kernels/step_guard.h"

namespace bareyolo {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i64:
      return "i64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::u8:
      return "u8";
  }
  return "?";
}

const char* layout_name(Layout layout) { return layout == Layout::nchw ? "NCHW" : "channels last"; }

// ---- Storage ----------------------------------------------------------------------------

Storage::Storage(size_t bytes, Device device, SourceLocation where)
    : data_(allocate_bytes(bytes, device, "a tensor", where)), bytes_(bytes), device_(device) {}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, Device device) {
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = data;
  storage->bytes_ = bytes;
  storage->device_ = device;
  storage->owned_ = false;
  return storage;
}

Storage::~Storage() {
  if (owned_) release_bytes(data_, device_);
}

// ---- Tensor -----------------------------------------------------------------------------

namespace {
// Elements of a shape as the fewest contiguous blocks: one when the tensors involved are packed,
// else one per image (an NCHW image is contiguous, and a channels-last one without gaps).
struct Blocks {
  int64_t count;
  size_t bytes;
};
Blocks contiguous_blocks(const Shape4& shape, bool all_packed, size_t element_bytes) {
  if (all_packed) return {1, static_cast<size_t>(shape.numel()) * element_bytes};
  return {shape.n, static_cast<size_t>(shape.image_numel()) * element_bytes};
}

// Whether each image of t is one contiguous block.
bool images_in_blocks(const Tensor& t) {
  return t.layout() == Layout::nchw || t.pixel_stride() == t.shape().c;
}

// The pixel stride of a packed tensor of `shape` in `layout`.
int64_t packed_pixel_stride(const Shape4& shape, Layout layout) {
  return layout_for(shape, layout) == Layout::channels_last ? shape.c : 1;
}
}  // namespace

Layout layout_for(const Shape4& shape, Layout layout) {
  return shape.layouts_coincide() ? Layout::nchw : layout;
}

Tensor Tensor::empty(Shape4 shape, Device device, DType dtype, SourceLocation where) {
  return empty(shape, device, dtype, Layout::nchw, where);
}

Tensor Tensor::empty(Shape4 shape, Device device, DType dtype, Layout layout,
                     SourceLocation where) {
  if (shape.n < 0 || shape.c < 0 || shape.h < 0 || shape.w < 0)
    throw std::invalid_argument("Tensor::empty: negative dimension in shape " + shape.str());
  Tensor t;
  t.storage_ = std::make_shared<Storage>(static_cast<size_t>(shape.numel()) * dtype_size(dtype),
                                         device, where);
  t.shape_ = shape;
  t.batch_stride_ = shape.image_numel();
  t.pixel_stride_ = packed_pixel_stride(shape, layout);
  t.dtype_ = dtype;
  return t;
}

bool Tensor::packed() const {
  return (shape_.n <= 1 || batch_stride_ == shape_.image_numel()) && images_in_blocks(*this);
}

Tensor Tensor::zeros(Shape4 shape, Device device, DType dtype, SourceLocation where) {
  Tensor t = empty(shape, device, dtype, where);
  t.zero();
  return t;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape4 shape, Device device,
                           SourceLocation where) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw std::invalid_argument("Tensor::from_vector: " + std::to_string(values.size()) +
                                " values for shape " + shape.str());
  Tensor host = empty(shape, Device::cpu(), dtype_of<T>(), where);
  if (!values.empty())  // an empty vector's data() may be null, which memcpy must not get
    std::memcpy(host.byte_pointer(), values.data(), values.size() * sizeof(T));
  return host.on(device, where);
}

Tensor Tensor::reshape(Shape4 shape) const {
  if (!dense() || shape.numel() != shape_.numel())
    throw std::invalid_argument("Tensor::reshape: " + shape_.str() + (dense() ? "" : " (strided)") +
                                " cannot be viewed as " + shape.str());
  Tensor view = *this;
  view.shape_ = shape;
  view.batch_stride_ = shape.image_numel();
  return view;
}

Tensor Tensor::prefix(Shape4 shape, Layout layout) const {
  if (!dense() || shape.numel() > shape_.numel())
    throw std::invalid_argument("Tensor::prefix: " + shape.str() + " does not fit in " +
                                shape_.str() + (dense() ? "" : " (strided)"));
  Tensor view = *this;
  view.shape_ = shape;
  view.batch_stride_ = shape.image_numel();
  view.pixel_stride_ = packed_pixel_stride(shape, layout);
  return view;
}

Tensor Tensor::channels(int64_t begin, int64_t end) const {
  if (begin < 0 || end > shape_.c || begin > end)
    throw std::out_of_range("Tensor::channels(" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") is outside the " + std::to_string(shape_.c) +
                            " channels of " + shape_.str());
  Tensor slice = *this;
  slice.offset_ += begin * (layout() == Layout::nchw ? shape_.plane() : 1);
  slice.shape_.c = end - begin;
  return slice;  // strides unchanged: images and pixels stay where they are in the parent
}

Tensor Tensor::images(int64_t begin, int64_t end) const {
  if (begin < 0 || end > shape_.n || begin > end)
    throw std::out_of_range("Tensor::images(" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") is outside the batch of " + shape_.str());
  Tensor slice = *this;
  slice.offset_ += begin * batch_stride_;
  slice.shape_.n = end - begin;
  return slice;
}

template <class T>
void Tensor::require_dtype(const char* what) const {
  if (!defined()) throw std::logic_error(std::string(what) + " on an undefined tensor");
  if (dtype_ != dtype_of<T>())
    throw std::invalid_argument(std::string(what) + ": tensor holds " + dtype_name(dtype_) +
                                ", asked for " + dtype_name(dtype_of<T>()));
}

char* Tensor::byte_pointer() const {
  return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

template <class T>
View<T> Tensor::view() {
  require_dtype<T>("Tensor::view");
  return {reinterpret_cast<T*>(byte_pointer()), shape_, batch_stride_, device(), pixel_stride_};
}

template <class T>
View<const T> Tensor::view() const {
  require_dtype<T>("Tensor::view");
  return {reinterpret_cast<const T*>(byte_pointer()), shape_, batch_stride_, device(),
          pixel_stride_};
}

void Tensor::copy_from(const Tensor& src, SourceLocation where) {
  if (!(src.shape_ == shape_) || src.dtype_ != dtype_)
    throw std::invalid_argument("Tensor::copy_from: source " + src.shape_.str() + " " +
                                dtype_name(src.dtype_) + " into " + shape_.str() + " " +
                                dtype_name(dtype_));
  const Device from = src.device(), to = device();
  if (from != to && !in_host_memory(from) && !in_host_memory(to))
    throw std::invalid_argument("Tensor::copy_from: " + from.str() + " to " + to.str() +
                                " directly is not supported; go through the host");
  if (layout() == src.layout() && images_in_blocks(*this) && images_in_blocks(src)) {
    const size_t element = dtype_size(dtype_);
    const Blocks blocks = contiguous_blocks(shape_, packed() && src.packed(), element);
    for (int64_t i = 0; i < blocks.count; ++i) {
      char* dst = byte_pointer() + i * batch_stride_ * element;
      const char* source = src.byte_pointer() + i * src.batch_stride_ * element;
      copy_bytes(dst, to, source, from, blocks.bytes, where);
    }
    return;
  }
  if (from == to) return copy_elements_from(src);
  // Across devices only blocks move: the source packed on its own device (if it is not), moved
  // in its layout, then laid out here.
  Tensor source = src;
  if (!images_in_blocks(src)) {
    source = empty(shape_, from, dtype_, src.layout(), where);
    source.copy_elements_from(src);
  }
  Tensor moved = empty(shape_, to, dtype_, src.layout(), where);
  moved.copy_from(source, where);
  copy_elements_from(moved);
}

void Tensor::copy_elements_from(const Tensor& src) {
  switch (dtype_) {
    case DType::f32:
      return ops::copy_elements(src.view<float>(), view<float>());
    case DType::f64:
      return ops::copy_elements(src.view<double>(), view<double>());
    case DType::bf16:
      return ops::copy_elements(src.view<bf16>(), view<bf16>());
    default:
      throw std::invalid_argument(std::string("Tensor::copy_from: ") + dtype_name(dtype_) + " " +
                                  layout_name(src.layout()) + " into " + layout_name(layout()) +
                                  ": only float, double and bf16 tensors change layout");
  }
}

Tensor Tensor::to(Device device, SourceLocation where) const {
  Tensor copy = empty(shape_, device, dtype_, where);
  copy.copy_from(*this, where);
  return copy;
}

void Tensor::zero() {
  if (!images_in_blocks(*this))
    throw std::logic_error("Tensor::zero: a channel slice " + shape_.str() +
                           " of a channels-last tensor is not in blocks; zero its whole tensor");
  const size_t element = dtype_size(dtype_);
  const Blocks blocks = contiguous_blocks(shape_, packed(), element);
  for (int64_t i = 0; i < blocks.count; ++i) {
    zero_bytes(byte_pointer() + i * batch_stride_ * element, blocks.bytes, device());
  }
}

template <class T>
std::vector<T> Tensor::to_vector(SourceLocation where) const {
  require_dtype<T>("Tensor::to_vector");
  step_guard::report(step_guard::Event::host_read, "Tensor::to_vector", where);
  Tensor host = to(Device::cpu(), where);
  const T* data = reinterpret_cast<const T*>(host.byte_pointer());
  return std::vector<T>(data, data + numel());
}

std::vector<double> Tensor::to_doubles(SourceLocation where) const {
  switch (dtype_) {
    case DType::f32: {
      std::vector<float> values = to_vector<float>(where);
      return {values.begin(), values.end()};
    }
    case DType::f64:
      return to_vector<double>(where);
    case DType::i64: {
      std::vector<int64_t> values = to_vector<int64_t>(where);
      return {values.begin(), values.end()};
    }
    case DType::bf16: {
      std::vector<double> values;
      for (bf16 value : to_vector<bf16>(where)) values.push_back(to_float(value));
      return values;
    }
    default:
      throw std::invalid_argument(std::string("Tensor::to_doubles: no conversion from ") +
                                  dtype_name(dtype_));
  }
}

void Tensor::convert_from(const Tensor& src) {
  if (!(src.shape_ == shape_) || !(src.device() == device()))
    throw std::invalid_argument("Tensor::convert_from: source " + src.shape_.str() + " on " +
                                src.device().str() + " into " + shape_.str() + " on " +
                                device().str() + "; shapes and devices must match");
  if (src.dtype_ == dtype_)
    copy_from(src);
  else if (src.dtype_ == DType::f32 && dtype_ == DType::bf16)
    ops::convert_to_bf16(src.view<float>(), view<bf16>());
  else if (src.dtype_ == DType::bf16 && dtype_ == DType::f32)
    ops::convert_from_bf16(src.view<bf16>(), view<float>());
  else
    throw std::invalid_argument(std::string("Tensor::convert_from: no conversion from ") +
                                dtype_name(src.dtype_) + " to " + dtype_name(dtype_) +
                                " (f32 <-> bf16 only)");
}

Tensor Tensor::converted(DType dtype) const {
  if (!defined()) throw std::logic_error("Tensor::converted on an undefined tensor");
  Tensor result = empty(shape_, device(), dtype, layout());
  result.convert_from(*this);
  return result;
}

template Tensor Tensor::from_vector<float>(const std::vector<float>&, Shape4, Device,
                                           SourceLocation);
template Tensor Tensor::from_vector<double>(const std::vector<double>&, Shape4, Device,
                                            SourceLocation);
template View<float> Tensor::view<float>();
template View<double> Tensor::view<double>();
template View<const float> Tensor::view<float>() const;
template View<const double> Tensor::view<double>() const;
template std::vector<float> Tensor::to_vector<float>(SourceLocation) const;
template std::vector<double> Tensor::to_vector<double>(SourceLocation) const;
template Tensor Tensor::from_vector<int64_t>(const std::vector<int64_t>&, Shape4, Device,
                                             SourceLocation);
template View<int64_t> Tensor::view<int64_t>();
template View<const int64_t> Tensor::view<int64_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>(SourceLocation) const;
template Tensor Tensor::from_vector<uint8_t>(const std::vector<uint8_t>&, Shape4, Device,
                                             SourceLocation);
template View<uint8_t> Tensor::view<uint8_t>();
template View<const uint8_t> Tensor::view<uint8_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>(SourceLocation) const;
template Tensor Tensor::from_vector<bf16>(const std::vector<bf16>&, Shape4, Device, SourceLocation);
template View<bf16> Tensor::view<bf16>();
template View<const bf16> Tensor::view<bf16>() const;
template std::vector<bf16> Tensor::to_vector<bf16>(SourceLocation) const;

}  // namespace bareyolo

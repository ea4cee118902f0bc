// engine/tensor_factories.h — how modules create their tensors for a device and dtype.
//
// Modules hold f32 tensors for training; the same modules built with f64 tensors run the
// double-precision CPU kernels, which is how whole blocks and the loss are checked against
// finite differences.
#pragma once

#include <random>
#include <stdexcept>
#include <vector>

#include "engine/tensor.h"

namespace bareyolo {

// A tensor of `dtype` holding `values`.
inline Tensor make_tensor(const std::vector<double>& values, Shape4 shape, Device device,
                          DType dtype) {
  if (dtype == DType::f64) return Tensor::from_vector(values, shape, device);
  return Tensor::from_vector(std::vector<float>(values.begin(), values.end()), shape, device);
}

// Values drawn from U(-bound, bound) (drawn in float, so f32 and f64 models built from one
// seed hold the same numbers).
inline Tensor uniform_tensor(Shape4 shape, float bound, std::mt19937_64& rng, Device device,
                             DType dtype) {
  std::uniform_real_distribution<float> draw(-bound, bound);
  std::vector<double> values(static_cast<size_t>(shape.numel()));
  for (double& v : values) v = draw(rng);
  return make_tensor(values, shape, device, dtype);
}

inline Tensor filled_tensor(Shape4 shape, double value, Device device, DType dtype) {
  return make_tensor(std::vector<double>(static_cast<size_t>(shape.numel()), value), shape, device,
                     dtype);
}

// Makes `t` a packed tensor of `shape` on `device` in `dtype` and `layout`, reallocating only
// when something changed: modules keep their intermediates across steps without allocating.
inline void ensure_tensor(Tensor& t, Shape4 shape, Device device, DType dtype,
                          Layout layout = Layout::nchw) {
  if (!t.defined() || !(t.shape() == shape) || !(t.device() == device) || t.dtype() != dtype ||
      !t.packed() || t.layout() != layout_for(shape, layout))
    t = Tensor::empty(shape, device, dtype, layout);
}
// The same, with the device, dtype and layout of `like` (a module's intermediates follow its
// input's layout).
inline void ensure_tensor(Tensor& t, Shape4 shape, const Tensor& like) {
  ensure_tensor(t, shape, like.device(), like.dtype(), like.layout());
}

}  // namespace bareyolo

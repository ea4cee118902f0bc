// engine/tensor_factories.h — what modules share to create tensors and to call the typed kernels.
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

// Calls fn.template operator()<T>() with T the C++ type of a floating dtype.
template <class Fn>
void with_float_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn.template operator()<float>(); return;
    case DType::f64: fn.template operator()<double>(); return;
    default:
      throw std::invalid_argument(std::string("no kernels for dtype ") + dtype_name(dtype));
  }
}

// A tensor of `dtype` holding `values`.
// A dense tensor as one flat (1, 1, 1, numel) view: optimizers do not care about shapes.
template <class T>
View<T> flat_tensor_view(Tensor& t) {
  View<T> v = t.view<T>();
  return flat_view(v.data, v.shape.numel(), v.device);
}

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
  return make_tensor(std::vector<double>(static_cast<size_t>(shape.numel()), value), shape,
                     device, dtype);
}

// Makes `t` a dense tensor of `shape` like `like` (device, dtype), reallocating only when
// something changed: modules keep their intermediates across steps without allocating.
inline void ensure_tensor(Tensor& t, Shape4 shape, const Tensor& like) {
  if (!t.defined() || !(t.shape() == shape) || !(t.device() == like.device()) ||
      t.dtype() != like.dtype() || !t.dense())
    t = Tensor::empty(shape, like.device(), like.dtype());
}

}  // namespace bareyolo

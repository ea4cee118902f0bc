// engine/optim/clip.cpp — see clip.h.
#include "engine/optim/clip.h"

#include <cmath>

#include "kernels/ops.h"

namespace bareyolo {

namespace {

// The sum of squares of the optimised gradients, into the arena's double for it.
Tensor& sum_of_squares(ParameterArena& arena, Tensor& gradients) {
  Tensor& sum = arena.squared_norm();
  with_float_type(gradients.dtype(), [&]<class T>() {
    ops::sum_of_squares<T>(flat_tensor_view<T>(gradients), sum.view<double>());
  });
  return sum;
}

}  // namespace

void clip_gradient_norm(ParameterArena& arena, double max_norm) {
  Tensor gradients = arena.gradient_range(0, arena.optimised());
  const Tensor& sum = sum_of_squares(arena, gradients);
  with_float_type(gradients.dtype(), [&]<class T>() {
    ops::clip_to_norm<T>(flat_tensor_view<T>(gradients), sum.view<double>(), max_norm);
  });
}

double gradient_norm(ParameterArena& arena) {
  Tensor gradients = arena.gradient_range(0, arena.optimised());
  return std::sqrt(sum_of_squares(arena, gradients).to_vector<double>().front());
}

}  // namespace bareyolo

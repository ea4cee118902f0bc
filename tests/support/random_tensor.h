// tests/support/random_tensor.h — a host float tensor of seeded uniform values (never all zeros),
// for the tests that feed a device real data.
#pragma once

#include "engine/tensor.h"
#include "tests/support/testing.h"

namespace bareyolo::testing {

inline Tensor random_tensor(Rng& rng, Shape4 shape, double lo = -3, double hi = 3) {
  return Tensor::from_vector(random_vector<float>(rng, shape.numel(), lo, hi), shape);
}

}  // namespace bareyolo::testing

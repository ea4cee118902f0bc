// tests/cuda/pool.cpp — the CUDA SPPF chain (three 5x5 pools in one kernel) refuses windows it
// cannot chain. The pools' comparisons with the CPU are the selftest's pool+upsample checks
// (tools/selftest/pool_checks.cpp, run on cuda:0 by tests/cuda/selftest.cpp).
#include <doctest/doctest.h>

#include <stdexcept>

#include "engine/tensor.h"
#include "kernels/ops.h"

using namespace bareyolo;

TEST_CASE("cuda SPPF chain refuses windows it cannot chain") {
  Tensor x = Tensor::zeros({1, 1, 8, 8}, Device::cuda(0));
  Tensor y = Tensor::zeros({1, 1, 8, 8}, Device::cuda(0));
  CHECK_THROWS_WITH_AS(
      ops::maxpool2d_chain3_forward<float>(x.view<float>(), {3, 2, 1}, y.view<float>(),
                                           y.view<float>(), y.view<float>()),
      doctest::Contains("stride 1"), std::invalid_argument);
}

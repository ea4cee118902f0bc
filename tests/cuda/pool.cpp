// tests/cuda/pool.cpp — the CUDA max pools against the CPU reference: forward (the shared-
// memory stride-1 path and the direct path), SPPF's three chained pools in one kernel, and the
// backward, on random inputs and on inputs full of ties (values from {0, 1, 2}: which element
// of a window is "the first maximum" then decides every gradient), dense and channel-slice
// views, sizes that do not divide the 32x32 tiles. Outputs poisoned first; the pools only
// compare and copy, and the backward adds in the CPU's order, so results must be bit-equal.
#include <cmath>

#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

constexpr double kExact = 0;

Tensor tied_tensor(Rng& rng, Shape4 shape) {
  std::vector<float> values = random_vector<float>(rng, shape.numel(), 0, 3);
  for (float& v : values) v = std::floor(v);
  return Tensor::from_vector(values, shape);
}

Shape4 pooled(Shape4 x, ops::Pool2dParams p) {
  return {x.n, x.c, ops::conv_out_size(x.h, p.kernel, p.stride, p.pad),
          ops::conv_out_size(x.w, p.kernel, p.stride, p.pad)};
}

const ops::Pool2dParams kPools[] = {{5, 1, 2}, {3, 1, 1}, {13, 1, 6},
                                    {3, 2, 1}, {2, 2, 0}, {5, 2, 2}};
const Shape4 kShapes[] = {{1, 1, 1, 1}, {2, 3, 20, 20}, {2, 2, 45, 70}, {1, 2, 33, 31}};

}  // namespace

TEST_CASE("cuda maxpool forward and backward equal the cpu, dense views") {
  Rng rng(51);
  for (ops::Pool2dParams p : kPools)
    for (Shape4 s : kShapes) {
      if (s.h + 2 * p.pad < p.kernel || s.w + 2 * p.pad < p.kernel) continue;
      const Shape4 out = pooled(s, p);
      for (bool ties : {false, true}) {
        Tensor x = ties ? tied_tensor(rng, s) : random_tensor(rng, s);
        INFO("kernel " << p.kernel << " stride " << p.stride << " pad " << p.pad << " shape "
                       << s.str() << (ties ? " with ties" : ""));
        compare_cuda_with_cpu(
            {x}, {Tensor::empty(out)},
            [p](auto& in, auto& o) {
              ops::maxpool2d_forward<float>(in[0].template view<float>(), p,
                                            o[0].template view<float>());
            },
            "maxpool forward", true, kExact, kExact);
        // dx starts random: the backward must add into it, so it is not poisoned.
        compare_cuda_with_cpu(
            {x, random_tensor(rng, out)}, {random_tensor(rng, s)},
            [p](auto& in, auto& o) {
              ops::maxpool2d_backward<float>(in[0].template view<float>(),
                                             in[1].template view<float>(), p,
                                             o[0].template view<float>());
            },
            "maxpool backward", false, kExact, kExact);
      }
    }
}

TEST_CASE("cuda maxpool on channel slices (strided batches) equals the cpu") {
  Rng rng(52);
  const Shape4 parent{3, 8, 37, 29};
  for (ops::Pool2dParams p : {ops::Pool2dParams{5, 1, 2}, ops::Pool2dParams{3, 2, 1}}) {
    const Shape4 out_parent = pooled(parent, p);
    compare_cuda_with_cpu(
        {random_tensor(rng, parent)}, {Tensor::empty(out_parent)},
        [p](auto& in, auto& o) {
          Tensor y = o[0].channels(4, 7);
          ops::maxpool2d_forward<float>(in[0].channels(2, 5).template view<float>(), p,
                                        y.template view<float>());
          o[0].channels(0, 4).zero();
          o[0].channels(7, 8).zero();
        },
        "maxpool forward on slices", true, kExact, kExact);
    compare_cuda_with_cpu(
        {tied_tensor(rng, parent), random_tensor(rng, out_parent)}, {random_tensor(rng, parent)},
        [p](auto& in, auto& o) {
          Tensor dx = o[0].channels(1, 4);
          ops::maxpool2d_backward<float>(in[0].channels(2, 5).template view<float>(),
                                         in[1].channels(5, 8).template view<float>(), p,
                                         dx.template view<float>());
        },
        "maxpool backward on slices", false, kExact, kExact);
  }
}

TEST_CASE("cuda SPPF chain (three 5x5 pools in one kernel) equals three cpu pools") {
  Rng rng(53);
  const ops::Pool2dParams p{5, 1, 2};
  for (Shape4 s : {Shape4{2, 4, 20, 20}, Shape4{1, 3, 40, 33}, Shape4{2, 2, 3, 5}}) {
    for (bool ties : {false, true}) {
      // SPPF's layout: x is the first quarter of the concatenation, the pools the others.
      const Shape4 cat{s.n, 4 * s.c, s.h, s.w};
      Tensor x = ties ? tied_tensor(rng, s) : random_tensor(rng, s);
      compare_cuda_with_cpu(
          {x}, {Tensor::empty(cat)},
          [&](auto& in, auto& o) {
            const int64_t c = s.c;
            Tensor first = o[0].channels(0, c);
            first.copy_from(in[0]);
            auto slice = [&](int64_t k) { return o[0].channels(k * c, (k + 1) * c); };
            // GPU: the one fused kernel; CPU: three maxpool2d_forward calls.
            Tensor y1 = slice(1), y2 = slice(2), y3 = slice(3);
            ops::maxpool2d_chain3_forward<float>(
                first.template view<float>(), p, y1.template view<float>(),
                y2.template view<float>(), y3.template view<float>());
          },
          "SPPF chained pools", true, kExact, kExact);
    }
  }
}

TEST_CASE("cuda SPPF chain refuses windows it cannot chain") {
  Tensor x = Tensor::zeros({1, 1, 8, 8}, Device::cuda(0));
  Tensor y = Tensor::zeros({1, 1, 8, 8}, Device::cuda(0));
  CHECK_THROWS_WITH_AS(
      ops::maxpool2d_chain3_forward<float>(x.view<float>(), {3, 2, 1}, y.view<float>(),
                                           y.view<float>(), y.view<float>()),
      doctest::Contains("stride 1"), std::invalid_argument);
}

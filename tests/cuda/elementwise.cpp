// tests/cuda/elementwise.cpp — the CUDA SiLU and add kernels against the CPU reference, on
// random inputs, dense and channel-slice (strided) views, outputs poisoned beforehand.
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("cuda silu forward and backward equal the cpu") {
  Rng rng(41);
  for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{4, 16, 33, 17}}) {
    Tensor x = random_tensor(rng, s), dy = random_tensor(rng, s), dx = random_tensor(rng, s);
    compare_cuda_with_cpu(
        {x}, {Tensor::empty(s)},
        [](auto& in, auto& out) {
          ops::silu_forward<float>(in[0].template view<float>(), out[0].template view<float>());
        },
        "silu forward");
    // dx starts random: the backward must accumulate into it, so it is not poisoned.
    compare_cuda_with_cpu(
        {x, dy}, {dx},
        [](auto& in, auto& out) {
          ops::silu_backward<float>(in[0].template view<float>(), in[1].template view<float>(),
                                    out[0].template view<float>());
        },
        "silu backward", /*poison_outputs=*/false);
  }
}

TEST_CASE("cuda add forward and backward equal the cpu on channel slices") {
  Rng rng(42);
  Shape4 parent = {3, 8, 9, 11};
  Tensor a = random_tensor(rng, parent), b = random_tensor(rng, parent);
  compare_cuda_with_cpu(
      {a, b}, {Tensor::empty(parent)},
      [](auto& in, auto& out) {
        // Add channels 2..5 of a and b into channels 4..7 of the output.
        Tensor y = out[0].channels(4, 7);
        ops::add_forward<float>(in[0].channels(2, 5).template view<float>(),
                                in[1].channels(2, 5).template view<float>(),
                                y.template view<float>());
        // The channels the op does not write are zeroed on both devices.
        out[0].channels(0, 4).zero();
        out[0].channels(7, 8).zero();
      },
      "add forward");
  Tensor dy = random_tensor(rng, parent), da = random_tensor(rng, parent),
         db = random_tensor(rng, parent);
  compare_cuda_with_cpu(
      {dy}, {da, db},
      [](auto& in, auto& out) {
        ops::add_backward<float>(in[0].template view<float>(), out[0].template view<float>(),
                                 out[1].template view<float>());
      },
      "add backward", /*poison_outputs=*/false);
}

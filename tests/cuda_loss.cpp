// tests/cuda_loss.cpp — the loss's pointwise device ops (sigmoid, BCE-with-logits, forward and
// backward) against the CPU reference, on random logits over a wide range (|x| up to 30, where
// a naive log(sigmoid) would overflow) and random soft targets, dense and channel-slice views,
// outputs poisoned first. Tolerance: float32, kFloatRtol / kFloatAtol (the GPU's expf and
// log1pf are within 2 ulps of the CPU's).
#include "kernels/ops.h"
#include "tests/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("cuda sigmoid forward and backward equal the cpu") {
  Rng rng(71);
  for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{3, 255, 20, 20}}) {
    Tensor x = random_tensor(rng, s, -30, 30);
    compare_cuda_with_cpu({x}, {Tensor::empty(s)},
                          [](auto& in, auto& out) {
                            ops::sigmoid_forward<float>(in[0].template view<float>(),
                                                        out[0].template view<float>());
                          },
                          "sigmoid forward");
    Tensor y = random_tensor(rng, s, 0, 1);
    compare_cuda_with_cpu({y, random_tensor(rng, s)}, {random_tensor(rng, s)},
                          [](auto& in, auto& out) {
                            ops::sigmoid_backward<float>(in[0].template view<float>(),
                                                         in[1].template view<float>(),
                                                         out[0].template view<float>());
                          },
                          "sigmoid backward", false);
  }
}

TEST_CASE("cuda BCE with logits forward and backward equal the cpu") {
  Rng rng(72);
  for (float pos_weight : {1.0f, 2.5f})
    for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{3, 85, 20, 20}}) {
      Tensor x = random_tensor(rng, s, -30, 30), t = random_tensor(rng, s, 0, 1);
      compare_cuda_with_cpu({x, t}, {Tensor::empty(s)},
                            [pos_weight](auto& in, auto& out) {
                              ops::bce_with_logits_forward<float>(
                                  in[0].template view<float>(), in[1].template view<float>(),
                                  pos_weight, out[0].template view<float>());
                            },
                            "bce forward");
      compare_cuda_with_cpu({x, t, random_tensor(rng, s)}, {random_tensor(rng, s)},
                            [pos_weight](auto& in, auto& out) {
                              ops::bce_with_logits_backward<float>(
                                  in[0].template view<float>(), in[1].template view<float>(),
                                  pos_weight, in[2].template view<float>(),
                                  out[0].template view<float>());
                            },
                            "bce backward", false);
    }
}

TEST_CASE("cuda BCE on channel slices equals the cpu") {
  Rng rng(73);
  const Shape4 parent{4, 12, 6, 5};
  Tensor x = random_tensor(rng, parent, -8, 8), t = random_tensor(rng, parent, 0, 1);
  compare_cuda_with_cpu({x, t}, {Tensor::empty(parent)},
                        [](auto& in, auto& out) {
                          Tensor loss = out[0].channels(0, 7);
                          ops::bce_with_logits_forward<float>(
                              in[0].channels(5, 12).template view<float>(),
                              in[1].channels(1, 8).template view<float>(), 1.0f,
                              loss.template view<float>());
                          out[0].channels(7, 12).zero();
                        },
                        "bce forward on slices");
}

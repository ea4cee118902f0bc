// tests/cuda/upsample.cpp — nearest x2 upsampling on the GPU against the CPU (dense and
// channel-slice views; bit-equal: it copies, and the backward adds in the CPU's order), and
// Concat without copies on the GPU: a graph placed on cuda:0 gives its Upsample producers
// channel slices of the Concat's buffer as their outputs.
#include <memory>

#include "engine/graph.h"
#include "engine/layers/upsample.h"
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("cuda upsample x2 forward and backward equal the cpu") {
  Rng rng(61);
  for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{4, 16, 20, 20}}) {
    const Shape4 big{s.n, s.c, 2 * s.h, 2 * s.w};
    compare_cuda_with_cpu(
        {random_tensor(rng, s)}, {Tensor::empty(big)},
        [](auto& in, auto& out) {
          ops::upsample_nearest2x_forward<float>(in[0].template view<float>(),
                                                 out[0].template view<float>());
        },
        "upsample forward", true, 0, 0);
    compare_cuda_with_cpu(
        {random_tensor(rng, big)}, {random_tensor(rng, s)},
        [](auto& in, auto& out) {
          ops::upsample_nearest2x_backward<float>(in[0].template view<float>(),
                                                  out[0].template view<float>());
        },
        "upsample backward", false, 0, 0);
  }
}

TEST_CASE("cuda upsample on channel slices equals the cpu") {
  Rng rng(62);
  const Shape4 small{3, 6, 9, 11}, big{3, 6, 18, 22};
  compare_cuda_with_cpu(
      {random_tensor(rng, small)}, {Tensor::empty(big)},
      [](auto& in, auto& out) {
        Tensor y = out[0].channels(3, 5);
        ops::upsample_nearest2x_forward<float>(in[0].channels(1, 3).template view<float>(),
                                               y.template view<float>());
        out[0].channels(0, 3).zero();
        out[0].channels(5, 6).zero();
      },
      "upsample forward on slices", true, 0, 0);
  compare_cuda_with_cpu(
      {random_tensor(rng, big)}, {random_tensor(rng, small)},
      [](auto& in, auto& out) {
        Tensor dx = out[0].channels(2, 6);
        ops::upsample_nearest2x_backward<float>(in[0].channels(0, 4).template view<float>(),
                                                dx.template view<float>());
      },
      "upsample backward on slices", false, 0, 0);
}

TEST_CASE("cuda graph: Concat producers write into the concatenation's buffer") {
  auto build = [] {
    auto graph = std::make_unique<Graph>();
    const int a = graph->add("up_a", {Graph::kGraphInput}, std::make_unique<Upsample>());
    const int b = graph->add("up_b", {Graph::kGraphInput}, std::make_unique<Upsample>());
    graph->set_outputs({graph->add_concat("cat", {a, b})});
    return graph;
  };
  Rng rng(63);
  const Shape4 s{2, 3, 5, 7};
  Tensor x = random_tensor(rng, s);
  auto gpu = build(), cpu = build();
  for (Mode mode : {Mode::train, Mode::eval}) {
    INFO((mode == Mode::train ? "training plan" : "evaluation plan"));
    const Tensor cat = gpu->forward(x.to(Device::cuda(0)), mode).at(0);
    REQUIRE(cat.device() == Device::cuda(0));
    const int64_t plane = 4 * s.h * s.w;
    for (int node : {0, 1}) {
      const Tensor& produced = gpu->output_of(node);
      CHECK(produced.device() == Device::cuda(0));
      CHECK(produced.storage() == cat.storage());  // the same allocation, not a copy
      // Channels [3 node, 3 node + 3) of every image of the concatenation.
      CHECK(produced.view<float>().data == cat.view<float>().data + node * s.c * plane);
      CHECK(produced.batch_stride() == cat.batch_stride());
    }
    // And the values are the CPU's.
    const Tensor expected = cpu->forward(x, mode).at(0);
    check_close(cat.to_vector<float>(), expected.to_vector<float>(), 0, 0, "concat of upsamples");
  }
}

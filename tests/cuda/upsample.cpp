// tests/cuda/upsample.cpp — Concat without copies on the GPU: a graph placed on cuda:0 gives its
// Upsample producers channel slices of the Concat's buffer as their outputs, and the values are
// the CPU's. Upsampling's comparisons with the CPU are the selftest's pool+upsample checks
// (tools/selftest/pool_checks.cpp, run on cuda:0 by tests/cuda/selftest.cpp).
#include <memory>

#include "engine/graph.h"
#include "engine/layers/upsample.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

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

// tests/unit/graph.cpp — the static graph: zero-copy Concat (producers write into slices of
// the Concat's buffer), backward through a DAG with a tensor read twice, gradients sharing
// buffers where their live ranges allow, the per-node callback order, the generation a CUDA
// graph's recording is checked against, and clear errors for malformed graphs.
#include "engine/graph.h"
#include "engine/layers/conv_bn_silu.h"
#include "engine/layers/upsample.h"
#include "tests/unit/module_check.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// input -> a (conv s2) -> [chain] -> b (conv) -> up (x2) ; cat(b, a) -> c (conv) ;
// outputs: c, up. `a` is read twice (by the chain or b, and by the Concat): its gradient gets
// both contributions. The chain is `chain` 4-channel convolutions (1x1 and 3x3 in turn).
Graph small_graph(DType dtype, int chain = 0) {
  std::mt19937_64 init(5);
  Graph g;
  auto conv = [&](int c_in, int c_out, int kernel, int stride) {
    return std::make_unique<ConvBnSilu>(c_in, c_out, kernel, stride, -1, kYolov5Bn, init,
                                        Device::cpu(), dtype);
  };
  int a = g.add("model.0.", {Graph::kGraphInput}, conv(3, 4, 3, 2));
  int last = a;
  for (int i = 0; i < chain; ++i)
    last = g.add("chain." + std::to_string(i) + ".", {last}, conv(4, 4, i % 2 ? 3 : 1, 1));
  int b = g.add("model.1.", {last}, conv(4, 5, 1, 1));
  int up = g.add("model.2.", {b}, std::make_unique<Upsample>());
  int cat = g.add_concat("model.3.", {b, a});
  int c = g.add("model.4.", {cat}, conv(9, 2, 3, 1));
  g.set_outputs({c, up});
  return g;
}

// The graph as one module with two outputs stacked along the batch... kept simple: the test
// output is both outputs flattened; see GraphUnderTest::forward.
class GraphUnderTest : public Module {
 public:
  explicit GraphUnderTest(Graph graph) : graph_(std::move(graph)) {}
  Shape4 output_shape(std::span<const Shape4> inputs) const override {
    // c: (n, 2, h/2, w/2) and up: (n, 5, h, w) -> flattened into one (1, 1, 1, total) view
    const Shape4 x = inputs[0];
    const int64_t h = (x.h + 1) / 2, w = (x.w + 1) / 2;
    return {1, 1, 1, x.n * 2 * h * w + x.n * 5 * 2 * h * 2 * w};
  }
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override {
    const auto& outs = graph_.forward(inputs[0], mode);
    std::vector<double> all = outs[0].to_vector<double>(), up = outs[1].to_vector<double>();
    all.insert(all.end(), up.begin(), up.end());
    output.copy_from(Tensor::from_vector(all, output.shape()));
    shapes_ = {outs[0].shape(), outs[1].shape()};
  }
  void backward(std::span<const Tensor>, const Tensor&, const Tensor& grad_output,
                std::span<Tensor>, ops::GradientWrite) override {
    std::vector<double> g = grad_output.to_vector<double>();
    const auto split = g.begin() + shapes_[0].numel();
    graph_.backward({Tensor::from_vector(std::vector<double>(g.begin(), split), shapes_[0]),
                     Tensor::from_vector(std::vector<double>(split, g.end()), shapes_[1])});
  }
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override {
    for (StateEntry& e : graph_.state()) {
      e.name = prefix + e.name;
      state.push_back(e);
    }
  }
  Graph graph_;
  std::vector<Shape4> shapes_;
};

bool inside(const Tensor& part, const Tensor& whole) {
  auto* p = static_cast<const char*>(part.storage()->data());
  return part.storage() == whole.storage() && p != nullptr;
}

}  // namespace

TEST_CASE("graph concat producers write straight into the concat buffer") {
  Graph g = small_graph(DType::f32);
  Rng rng(71);
  Tensor x = Tensor::from_vector(random_vector<float>(rng, 2 * 3 * 8 * 10), {2, 3, 8, 10});
  g.forward(x, Mode::train);
  const Tensor& a = g.output_of(0);
  const Tensor& b = g.output_of(1);
  const Tensor& cat = g.output_of(3);
  CHECK(inside(a, cat));
  CHECK(inside(b, cat));
  CHECK(b.offset() == cat.offset());  // b comes first in the Concat
  CHECK(a.offset() == cat.offset() + 5 * 4 * 5);
  CHECK(a.batch_stride() == cat.batch_stride());
  // The concat buffer holds b then a, channel by channel, for every image.
  std::vector<float> both = cat.to_vector<float>(), first = b.to_vector<float>(),
                     second = a.to_vector<float>();
  CHECK(std::equal(first.begin(), first.begin() + 5 * 20, both.begin()));
  CHECK(std::equal(second.begin(), second.begin() + 4 * 20, both.begin() + 5 * 20));
}

TEST_CASE("graph backward matches finite differences through a shared tensor and a concat") {
  Rng rng(72);
  GraphUnderTest net(small_graph(DType::f64));
  check_module_gradients(net, {{2, 3, 6, 5}}, Mode::train, rng, /*input_gradients=*/false);
}

// With a chain of three between a and b: up's gradient is dead once up's backward has run,
// so chain.2's (first written by b's backward, which runs next) takes its buffer, and chain.0's
// (first written by chain.1's backward) takes it again after chain.2's own backward; chain.1's
// overlaps both and needs a buffer of its own. Backward must still be exact.
TEST_CASE("graph gradients share buffers whose live ranges do not overlap") {
  Graph g = small_graph(DType::f32, 3);
  Rng rng(74);
  const Shape4 input{2, 3, 6, 5};
  Tensor x = Tensor::from_vector(random_vector<float>(rng, input.numel()), input);
  g.forward(x, Mode::train);
  // Owners of a gradient buffer: every node but a and b (slices of the Concat's).
  const std::vector<Shape4> shapes = g.shapes(input);
  int64_t one_each = 0;
  for (int node = 0; node < g.size(); ++node)
    if (g.name(node) != "model.0." && g.name(node) != "model.1.") one_each += shapes[node].numel();
  const int64_t chain_map = shapes[1].numel();
  CHECK(g.planned_gradient_elements() == one_each - 2 * chain_map);

  GraphUnderTest net(small_graph(DType::f64, 3));
  check_module_gradients(net, {input}, Mode::train, rng, /*input_gradients=*/false);
}

TEST_CASE("graph reports each node after its backward in reverse order") {
  Graph g = small_graph(DType::f32);
  Rng rng(73);
  Tensor x = Tensor::from_vector(random_vector<float>(rng, 1 * 3 * 4 * 4), {1, 3, 4, 4});
  const auto& outs = g.forward(x, Mode::train);
  std::vector<int> order;
  g.backward({Tensor::zeros(outs[0].shape()), Tensor::zeros(outs[1].shape())},
             [&](int node) { order.push_back(node); });
  CHECK(order == std::vector<int>{4, 3, 2, 1, 0});
}

// A CUDA graph of a step replays into the memory the forward and backward wrote: whatever may
// give that memory back or plan it anew moves the generation a recording is checked against
// (models/train/solver.cpp), and nothing else does.
TEST_CASE("graph activations generation moves when its memory may go, and only then") {
  Graph g = small_graph(DType::f32);
  Rng rng(75);
  const Tensor x = Tensor::from_vector(random_vector<float>(rng, 2 * 3 * 4 * 4), {2, 3, 4, 4});
  uint64_t generation = g.activations_generation();
  auto moved = [&] {
    const bool changed = g.activations_generation() != generation;
    generation = g.activations_generation();
    return changed;
  };
  g.forward(x, Mode::train);
  g.set_mixed_precision(false);  // as it was
  g.set_channels_last(false);
  CHECK_FALSE(moved());
  g.release_activations();
  CHECK(moved());
  g.forward(x, Mode::train);
  CHECK_FALSE(moved());
  g.set_mixed_precision(true);
  CHECK(moved());
  g.set_mixed_precision(true);
  CHECK_FALSE(moved());
  g.set_channels_last(true);
  CHECK(moved());
  g.set_channels_last(true);
  CHECK_FALSE(moved());
}

TEST_CASE("graph rejects a node reading a later node and a producer in two concats") {
  Graph g;
  CHECK_THROWS_WITH_AS(g.add("x.", {0}, std::make_unique<Upsample>()),
                       doctest::Contains("does not come before it"), std::invalid_argument);
  int up = g.add("up.", {Graph::kGraphInput}, std::make_unique<Upsample>());
  int up2 = g.add("up2.", {up}, std::make_unique<Upsample>());
  g.add_concat("cat1.", {up});
  CHECK_THROWS_WITH_AS(g.add_concat("cat2.", {up2, up}), doctest::Contains("two Concat"),
                       std::invalid_argument);
}

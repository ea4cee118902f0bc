// tests/unit/mixed_precision.cpp — bf16 mixed precision (--amp; Graph::set_mixed_precision): the
// graph's activations are bf16 tensors while the head the loss reads, the master weights and
// their gradients stay float, the tiny model's loss under it tracks the float run's over 200 SGD
// steps, and the Solver rounds the convolutions' bf16 weights once per optimizer step.
#include <cmath>
#include <set>
#include <string>

#include "kernels/bf16.h"
#include "kernels/op_sequence.h"
#include "kernels/ops.h"
#include "models/train/solver.h"
#include "tests/support/mixed_precision_tracking.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

// Elements of `t` that bf16 cannot hold.
int64_t not_bf16(const Tensor& t) {
  int64_t count = 0;
  for (float v : t.to_vector<float>()) count += round_to_bf16(v) != v;
  return count;
}

}  // namespace

TEST_CASE("mixed precision: activations are bf16 tensors, the head, masters and gradients float") {
  DetectionModel model = tracking_model();
  const std::vector<TrackingBatch> data = tracking_batches();
  model.graph().set_mixed_precision(true);
  const std::vector<Tensor> head = model.forward(data[0].images, Mode::train);
  const Graph& graph = model.graph();
  for (int node = 0; node < graph.size(); ++node) {
    INFO("node " << graph.name(node));
    CHECK(graph.output_of(node).dtype() == DType::bf16);
  }
  for (const Tensor& level : head) {  // widened for the loss: float tensors of bf16 values
    CHECK(level.dtype() == DType::f32);
    CHECK(not_bf16(level) == 0);
  }
  int64_t float_weights = 0;
  for (const StateEntry& e : model.state())
    if (e.trainable()) {
      REQUIRE(e.value->dtype() == DType::f32);
      float_weights += not_bf16(*e.value);
    }
  CHECK(float_weights > 1000);             // the masters are not rounded
  CHECK(not_bf16(data[0].images) > 1000);  // nor is the caller's input

  // Backward from the float loss: float parameter gradients, finite, most of them not bf16
  // values (sums of bf16 products in float).
  forward_backward(model, data[0].images, data[0].labels, tracking_loss_options());
  int64_t gradient_values = 0, finite = 0;
  for (const StateEntry& e : model.state())
    if (e.trainable()) {
      REQUIRE(e.grad->dtype() == DType::f32);
      for (float g : e.grad->to_vector<float>()) {
        ++gradient_values;
        finite += std::isfinite(g);
      }
    }
  CHECK(finite == gradient_values);

  // Off again: the same forward is float's, which bf16 does not hold.
  model.graph().set_mixed_precision(false);
  CHECK(not_bf16(model.forward(data[0].images, Mode::train)[0]) > 100);
  CHECK(graph.output_of(0).dtype() == DType::f32);
}

TEST_CASE("mixed precision: the tiny model's loss tracks float over 200 steps") {
  const int steps = 200;
  const Tracking t = compare_tracking(tracking_losses(false, steps), tracking_losses(true, steps));
  CHECK(t.differing > steps / 2);  // the rounding is on
  CHECK(t.worst < 0.05);           // measured 0.036 (at steps 160-179; bf16 the lower)
  CHECK(t.learned < 0.8);          // both learn (measured 0.71)
}

// --amp through the Solver: the convolutions' bf16 weights are views of one arena that the
// update rounds once per optimizer step (ParameterArena::keep_bf16_copies), so a forward casts
// no weight; each copy is its weight rounded, as the cast at every forward made it; and when
// the Solver goes, the modules round at every forward again. In a channels-last graph the
// copies of the convolutions' weights are KRSC (every one whose layouts differ: kernel > 1x1,
// more than one input channel), transposed by that one rounding (round_weights_to_bf16).
TEST_CASE(
    "mixed precision: the Solver rounds the weights' bf16 copies once a step, KRSC in "
    "channels-last") {
  for (bool channels_last : {false, true}) {
    INFO("channels last " << channels_last);
    DetectionModel model = tracking_model();
    const std::vector<TrackingBatch> data = tracking_batches();
    std::vector<const StateEntry*> copied;
    const std::vector<StateEntry> state = model.state();
    for (const StateEntry& e : state)
      if (e.bf16) copied.push_back(&e);
    REQUIRE(copied.size() > 10);  // every convolution's weight
    auto copies_are_rounded_weights = [&] {
      int64_t krsc = 0;
      for (const StateEntry* e : copied) {
        INFO(e->name);
        REQUIRE(e->bf16->kept);
        const Tensor rounded = e->value->converted(DType::bf16).converted(DType::f32);
        CHECK(rounded.to_vector<float>() ==
              e->bf16->tensor.converted(DType::f32).to_vector<float>());  // NCHW order
        const Shape4 w = e->value->shape();
        const bool transposed = channels_last && w.c > 1 && w.plane() > 1;
        CHECK((e->bf16->tensor.layout() == Layout::channels_last) == transposed);
        krsc += transposed;
      }
      CHECK((krsc > 5) == channels_last);
    };
    {
      Solver solver(model, tracking_solver_options(data, channels_last));
      copies_are_rounded_weights();
      const std::string rounding = channels_last ? "round_weights_to_bf16" : "convert_to_bf16";
      for (int64_t iteration = 0; iteration < 3; ++iteration) {
        const TrackingBatch& batch = data[size_t(iteration) % data.size()];
        op_sequence::Recording recording;
        REQUIRE(solver.step(batch.images, batch.labels, iteration).updated);
        const std::vector<op_sequence::Call> calls = recording.take();
        copies_are_rounded_weights();
        // One rounding of all the copies (the arena's) in the step, and no cast into any one.
        std::set<std::string> copy_views;
        for (const StateEntry* e : copied)
          copy_views.insert(op_sequence::describe(e->bf16->tensor.view<bf16>()));
        const std::string arena_shape = Shape4{1, solver.arena().parameters(), 1, 1}.str();
        int arena_roundings = 0;
        for (const op_sequence::Call& call : calls)
          if (call.op == "convert_to_bf16" || call.op == "round_weights_to_bf16") {
            CHECK(copy_views.count(call.arguments[1]) == 0);
            arena_roundings +=
                call.op == rounding && call.arguments[1].find(arena_shape) != std::string::npos;
          }
        CHECK(arena_roundings == 1);
      }
    }
    for (const StateEntry* e : copied) {
      CHECK_FALSE(e->bf16->kept);
      CHECK_FALSE(e->bf16->tensor.defined());
    }
    model.forward(data[0].images, Mode::train);  // rounds its own copies again
    for (const StateEntry* e : copied) CHECK(e->bf16->tensor.defined());
  }
}

// The transposition of krsc_source: every element of a segment reads its KCRS source, every
// other element itself, on random segments (with gaps between them and before the first).
TEST_CASE("mixed precision: round_weights_to_bf16 writes KRSC segments, the rest in place") {
  testing::Rng rng(91);
  const std::vector<float> values = testing::random_vector<float>(rng, 400, -3, 3);
  // (offset, out channels, in channels, kernel area)
  const std::vector<int64_t> segments = {5, 2, 3, 9, 70, 4, 5, 4, 200, 3, 7, 9};
  std::vector<float> expected(values.size());
  for (size_t e = 0; e < values.size(); ++e) expected[e] = values[e];
  for (size_t s = 0; s < segments.size(); s += 4) {
    const int64_t offset = segments[s], k_count = segments[s + 1], channels = segments[s + 2],
                  area = segments[s + 3];
    for (int64_t k = 0; k < k_count; ++k)
      for (int64_t a = 0; a < area; ++a)
        for (int64_t c = 0; c < channels; ++c)  // KRSC element (k, a, c) <- KCRS (k, c, a)
          expected[size_t(offset + (k * area + a) * channels + c)] =
              values[size_t(offset + (k * channels + c) * area + a)];
  }
  for (float& v : expected) v = round_to_bf16(v);
  const Tensor from = Tensor::from_vector(values, {1, 400, 1, 1});
  Tensor to = Tensor::zeros({1, 400, 1, 1}, Device::cpu(), DType::bf16);
  const Tensor table = Tensor::from_vector(segments, {1, 1, 1, int64_t(segments.size())});
  ops::round_weights_to_bf16(from.view<float>(), to.view<bf16>(), table.view<int64_t>());
  CHECK(to.converted(DType::f32).to_vector<float>() == expected);
  const Tensor torn = Tensor::from_vector(std::vector<int64_t>(11, 0), {1, 1, 1, 11});
  CHECK_THROWS_WITH_AS(
      ops::round_weights_to_bf16(from.view<float>(), to.view<bf16>(), torn.view<int64_t>()),
      doctest::Contains("a dense multiple of 4"), std::invalid_argument);
}

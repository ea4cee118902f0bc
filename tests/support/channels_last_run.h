// tests/support/channels_last_run.h — the tiny model trained in one layout, shared by the CPU's
// channels-last test (tests/unit/channels_last.cpp) and its GPU twin
// (tests/cuda/channels_last.cpp): what a run in NCHW and one in channels last must agree on, bit
// for bit.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/optim/sgd.h"
#include "engine/parameter_arena.h"
#include "tests/support/mixed_precision_tracking.h"

namespace bareyolo::testing {

// `values` (an NCHW host tensor) laid out in `layout` on `device`.
inline Tensor laid_out(const Tensor& values, Layout layout, Device device = Device::cpu()) {
  Tensor t = Tensor::empty(values.shape(), device, values.dtype(), layout);
  t.copy_from(values);
  return t;
}

// A float tensor of `shape` in `layout` on `device` whose every element is NaN: an op that fails
// to write one fails the comparison.
inline Tensor poisoned(Shape4 shape, Layout layout, Device device = Device::cpu()) {
  const std::vector<float> nan(size_t(shape.numel()), std::numeric_limits<float>::quiet_NaN());
  return laid_out(Tensor::from_vector(nan, shape), layout, device);
}

// The bits of a float tensor's values (on any device), in NCHW order.
inline std::vector<uint32_t> bits_of(const Tensor& t) {
  std::vector<uint32_t> bits;
  for (float v : t.to_vector<float>()) bits.push_back(std::bit_cast<uint32_t>(v));
  return bits;
}

// The tiny model's evaluation head, and after forward and backward of one batch its loss and
// every parameter gradient, and the weights after three SGD steps; its activations in `layout`
// (and bf16 under `amp`), on `device`.
struct TinyRun {
  std::vector<Tensor> head;
  double loss = 0;
  std::vector<Tensor> gradients, weights;
};

inline TinyRun run_tiny(Layout layout, bool amp, Device device = Device::cpu()) {
  models::DetectionModel model = tracking_model(device);
  model.graph().set_channels_last(layout == Layout::channels_last);
  model.graph().set_mixed_precision(amp);
  const std::vector<TrackingBatch> data = tracking_batches();
  TinyRun run;
  for (const Tensor& level : model.forward(data[0].images.to(device), Mode::eval))
    run.head.push_back(level.to(Device::cpu()));
  const Graph& graph = model.graph();
  int64_t channels_last_nodes = 0;
  ParameterArena arena(model.state());
  Sgd sgd(arena, 0.02, 0.9, 5e-4);
  for (int step = 0; step < 3; ++step) {
    const TrackingBatch& batch = data[size_t(step)];
    const double loss =
        models::read_loss(models::forward_backward(model, batch.images.to(device), batch.labels,
                                                   tracking_loss_options()))
            .total;
    if (step == 0) {
      run.loss = loss;
      for (const StateEntry& e : model.state())
        if (e.trainable()) run.gradients.push_back(e.grad->to(Device::cpu()));
      for (int node = 0; node < graph.size(); ++node)
        channels_last_nodes += graph.output_of(node).layout() == Layout::channels_last;
    }
    sgd.step();
    sgd.zero_grad();
  }
  // Every node's output is channels last (at 64 px no shape has the two layouts coincide).
  CHECK(channels_last_nodes == (layout == Layout::channels_last ? graph.size() : 0));
  for (const StateEntry& e : model.state())
    if (e.trainable()) run.weights.push_back(e.value->to(Device::cpu()));
  return run;
}

inline void check_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("tensor " << k);
    CHECK(bits_of(a[k]) == bits_of(b[k]));
  }
}

// Two runs of the tiny model that must agree bit for bit (the same computation in two layouts).
inline void check_same_run(const TinyRun& a, const TinyRun& b) {
  CHECK(std::bit_cast<uint64_t>(a.loss) == std::bit_cast<uint64_t>(b.loss));
  check_same_bits(a.head, b.head);
  check_same_bits(a.gradients, b.gradients);
  check_same_bits(a.weights, b.weights);
  CHECK(a.gradients.size() > 20);
}

}  // namespace bareyolo::testing

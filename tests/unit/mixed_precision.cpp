// tests/unit/mixed_precision.cpp — bf16 mixed precision on float tensors (--amp;
// engine/mixed_precision.h): what the graph hands on is bf16 values while the master weights
// stay float, and the tiny model's loss under it tracks the float run's over 200 SGD steps.
#include <cmath>

#include "engine/optim/clip.h"
#include "engine/optim/sgd.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "models/loss/head_loss.h"
#include "models/train/step.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

DetectionModel tiny_model() {
  return DetectionModel(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = 2, .seed = 3});
}

// Elements of `t` that bf16 cannot hold.
int64_t not_bf16(const Tensor& t) {
  int64_t count = 0;
  for (float v : t.to_vector<float>()) count += round_to_bf16(v) != v;
  return count;
}

struct Batch {
  Tensor images;
  std::vector<LabelRow> labels;
};

// Four batches of 4 random images, two boxes each, cycled: more than one batch to memorise.
std::vector<Batch> batches() {
  Rng rng(1604);
  std::vector<Batch> out;
  for (int b = 0; b < 4; ++b) {
    Batch batch{
        Tensor::from_vector(random_vector<float>(rng, 4 * 3 * 64 * 64, 0, 1), {4, 3, 64, 64}), {}};
    for (int image = 0; image < 4; ++image)
      for (int box = 0; box < 2; ++box) {
        const std::vector<float> r = random_vector<float>(rng, 4, 0.2, 0.8);
        batch.labels.push_back({image, box, r[0], r[1], r[2] * 0.5f, r[3] * 0.5f});
      }
    out.push_back(batch);
  }
  return out;
}

// The total loss of each of `steps` SGD steps over the cycled batches.
std::vector<double> train(bool amp, int steps) {
  DetectionModel model = tiny_model();
  model.graph().set_mixed_precision(amp);
  ParameterArena arena(model.state());
  Sgd sgd(arena, 0.02, 0.9, 5e-4);
  const LossOptions options{scale_loss_gains({}, 3, 2, 64), 2};
  const std::vector<Batch> data = batches();
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    const Batch& batch = data[size_t(step) % data.size()];
    losses.push_back(forward_backward(model, batch.images, batch.labels, options).total);
    clip_gradient_norm(arena, 10.0);
    sgd.step();
    sgd.zero_grad();
  }
  return losses;
}

}  // namespace

TEST_CASE("mixed precision: the graph hands on bf16 values, the master weights stay float") {
  DetectionModel model = tiny_model();
  const std::vector<Batch> data = batches();
  model.graph().set_mixed_precision(true);
  const std::vector<Tensor> head = model.forward(data[0].images, Mode::train);
  const Graph& graph = model.graph();
  for (int node = 0; node < graph.size(); ++node) {
    INFO("node " << graph.name(node));
    CHECK(not_bf16(graph.output_of(node)) == 0);
  }
  for (const Tensor& level : head) CHECK(not_bf16(level) == 0);
  int64_t float_weights = 0;
  for (const StateEntry& e : model.state())
    if (e.trainable()) float_weights += not_bf16(*e.value);
  CHECK(float_weights > 1000);             // the masters are not rounded
  CHECK(not_bf16(data[0].images) > 1000);  // nor is the caller's input

  // Off again: the same forward is float's, which bf16 does not hold.
  model.graph().set_mixed_precision(false);
  CHECK(not_bf16(model.forward(data[0].images, Mode::train)[0]) > 100);
}

TEST_CASE("mixed precision: the tiny model's loss tracks float over 200 steps") {
  const int steps = 200, window = 20;
  const std::vector<double> fp32 = train(false, steps), bf16 = train(true, steps);
  double worst = 0;
  int differing = 0;
  for (int begin = 0; begin < steps; begin += window) {
    double a = 0, b = 0;
    for (int k = begin; k < begin + window; ++k) {
      a += fp32[size_t(k)] / window;
      b += bf16[size_t(k)] / window;
      differing += fp32[size_t(k)] != bf16[size_t(k)];
    }
    worst = std::max(worst, std::fabs(b - a) / a);
    MESSAGE("steps " << begin << "-" << begin + window - 1 << ": fp32 " << a << ", bf16 " << b);
  }
  MESSAGE("largest relative difference of a 20-step mean: " << worst);
  CHECK(differing > steps / 2);  // the rounding is on
  CHECK(worst < 0.05);           // measured 0.038 (at steps 180-199; bf16 the lower)
  // Both learn: the last 20 steps well below the first 20.
  double first = 0, last = 0;
  for (int k = 0; k < window; ++k) first += bf16[size_t(k)], last += bf16[size_t(steps - 1 - k)];
  CHECK(last < 0.8 * first);  // measured 0.71
}

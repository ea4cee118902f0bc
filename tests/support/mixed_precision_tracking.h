// tests/support/mixed_precision_tracking.h — the tracking check of mixed precision, shared by the
// CPU test (tests/unit/mixed_precision.cpp) and its GPU twin (tests/cuda/train_step.cpp): the
// tiny model trained for `steps` SGD steps over four cycled batches, with and without --amp, and
// what the two loss curves say when set side by side in windows of 20 steps.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/optim/clip.h"
#include "engine/optim/sgd.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "models/loss/head_loss.h"
#include "models/train/solver.h"
#include "models/train/step.h"
#include "tests/support/testing.h"

namespace bareyolo::testing {

inline models::DetectionModel tracking_model(Device device = Device::cpu()) {
  return models::DetectionModel(models::load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                                {.nc = 2, .seed = 3, .device = device});
}

struct TrackingBatch {
  Tensor images;
  std::vector<models::LabelRow> labels;
};

// Four batches of 4 random images (64 px), two boxes each: more than one batch to memorise.
inline std::vector<TrackingBatch> tracking_batches() {
  Rng rng(1604);
  std::vector<TrackingBatch> out;
  for (int b = 0; b < 4; ++b) {
    TrackingBatch batch{
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

inline const models::LossOptions& tracking_loss_options() {
  static const models::LossOptions options{models::scale_loss_gains({}, 3, 2, 64), 2};
  return options;
}

// The total loss of each of `steps` SGD steps (lr 0.02, clip at 10) over the cycled batches.
// A Solver's options for the tracking batches under --amp: one optimizer step per batch, the
// activations channels last or not.
inline models::SolverOptions tracking_solver_options(const std::vector<TrackingBatch>& data,
                                                     bool channels_last) {
  return {.epochs = 10,
          .batches_per_epoch = int64_t(data.size()),
          .batch = int(data[0].images.shape().n),
          .nbs = int(data[0].images.shape().n),
          .loss = tracking_loss_options(),
          .amp = true,
          .channels_last = channels_last};
}

inline std::vector<double> tracking_losses(bool amp, int steps, Device device = Device::cpu()) {
  models::DetectionModel model = tracking_model(device);
  model.graph().set_mixed_precision(amp);
  ParameterArena arena(model.state());
  Sgd sgd(arena, 0.02, 0.9, 5e-4);
  const std::vector<TrackingBatch> data = tracking_batches();
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    const TrackingBatch& batch = data[size_t(step) % data.size()];
    losses.push_back(
        models::read_loss(models::forward_backward(model, batch.images.on(device), batch.labels,
                                                   tracking_loss_options()))
            .total);
    clip_gradient_norm(arena, 10.0);
    sgd.step();
    sgd.zero_grad();
  }
  return losses;
}

struct Tracking {
  double worst = 0;    // the largest relative difference of two 20-step means
  int differing = 0;   // steps whose losses differ at all (the rounding is on)
  double learned = 0;  // mixed precision's last 20 steps over its first 20
};

inline Tracking compare_tracking(const std::vector<double>& fp32, const std::vector<double>& bf16) {
  const int steps = int(fp32.size()), window = 20;
  Tracking t;
  for (int begin = 0; begin + window <= steps; begin += window) {
    double a = 0, b = 0;
    for (int k = begin; k < begin + window; ++k) {
      a += fp32[size_t(k)] / window;
      b += bf16[size_t(k)] / window;
      t.differing += fp32[size_t(k)] != bf16[size_t(k)];
    }
    t.worst = std::max(t.worst, std::fabs(b - a) / a);
    MESSAGE("steps " << begin << "-" << begin + window - 1 << ": fp32 " << a << ", bf16 " << b);
  }
  double first = 0, last = 0;
  for (int k = 0; k < window; ++k) first += bf16[size_t(k)], last += bf16[size_t(steps - 1 - k)];
  t.learned = last / first;
  MESSAGE("largest relative difference of a 20-step mean: " << t.worst
                                                            << "; bf16's last 20 "
                                                               "steps over its first 20: "
                                                            << t.learned);
  return t;
}

}  // namespace bareyolo::testing

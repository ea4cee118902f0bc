// tests/cuda/train_step.cpp — one whole training step of the tiny model on the GPU against the
// same step on the CPU: forward, YOLOv5's loss, backward, gradient clipping and the SGD step
// (models/train/step.h, engine/optim/sgd.h), from the same initial weights and batch; the
// parameters after the step must agree, and the clip and the update must not make the host
// wait for the device (cuda::host_waits).
//
// Tolerance: every kernel is within a few float ulps of its CPU reference; through ~25 layers
// forward and back and one SGD step (lr 0.01) the parameters stay within 1e-4 relative
// (norm-wise per tensor), while a wrong gradient anywhere moves a tensor by far more.
#include "engine/optim/clip.h"
#include "engine/optim/sgd.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "models/train/step.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {

std::vector<std::vector<double>> one_step(Device device) {
  DetectionModel model(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                       {.nc = 2, .seed = 9, .device = device});
  testing::Rng rng(77);
  const Tensor images = Tensor::from_vector(
      testing::random_vector<float>(rng, 4 * 3 * 64 * 64, 0, 1), {4, 3, 64, 64});
  const std::vector<LabelRow> labels = {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f},
                                        {1, 1, 0.6f, 0.5f, 0.4f, 0.2f},
                                        {3, 1, 0.2f, 0.8f, 0.15f, 0.2f}};
  std::vector<StateEntry> state = model.state();
  ParameterArena arena(state);
  Sgd sgd(arena, 0.01, 0.9, 5e-4);
  forward_backward(model, images.to(device), labels, {scale_loss_gains({}, 3, 2, 64), 2});
  // The clip (its norm stays on the device) and the SGD pass: no wait for the GPU between them.
  const uint64_t waits = cuda::host_waits();
  clip_gradient_norm(arena, 10.0);
  sgd.step();
  CHECK(cuda::host_waits() == waits);
  std::vector<std::vector<double>> values;
  for (const StateEntry& e : state) values.push_back(e.value->to_doubles());
  return values;
}

}  // namespace

TEST_CASE("one training step of the tiny model: GPU == CPU") {
  const std::vector<std::vector<double>> cpu = one_step(Device::cpu());
  const std::vector<std::vector<double>> gpu = one_step(Device::cuda(0));
  REQUIRE(cpu.size() == gpu.size());
  for (size_t p = 0; p < cpu.size(); ++p) {
    double diff = 0, norm = 0;
    for (size_t k = 0; k < cpu[p].size(); ++k) {
      diff += (cpu[p][k] - gpu[p][k]) * (cpu[p][k] - gpu[p][k]);
      norm += cpu[p][k] * cpu[p][k];
    }
    CHECK_MESSAGE(std::sqrt(diff / std::max(norm, 1e-30)) < 1e-4, "parameter " << p);
  }
}

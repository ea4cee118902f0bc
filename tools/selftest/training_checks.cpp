// tools/selftest/training_checks.cpp — the tiny model (models/yolov5-tiny.yaml): the helpers
// the decode and loss checks share (its head, labels and loss options), and its training checks
// (see selftest.h; tolerances: the top of selftest.cpp): one training step's gradients, and the
// losses of three Solver steps, on the DUT in float against the model in double.
#include <string>
#include <utility>

#include "engine/shipped_files.h"
#include "models/loss/head_loss.h"
#include "models/train/solver.h"
#include "models/yolo/model_config.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

using namespace bareyolo::models;  // the model and its training under check

ModelConfig tiny_config() { return load_model_config(shipped_file("models/yolov5-tiny.yaml")); }

std::vector<Tensor> random_head(const DetectionModel& model, Random& random, int64_t images,
                                double lo, double hi) {
  std::vector<Tensor> head;
  for (double stride : model.strides()) {
    const int64_t cells = int64_t(kTinyImageSize / stride);
    head.push_back(random.uniform(
        {images, model.num_anchors() * model.outputs_per_anchor(), cells, cells}, lo, hi));
  }
  return head;
}

std::vector<Tensor> on_device(const std::vector<Tensor>& tensors, const Device& device) {
  std::vector<Tensor> moved;
  for (const Tensor& t : tensors) moved.push_back(t.to(device));
  return moved;
}

std::vector<LabelRow> random_labels(Random& random, int images, int count) {
  std::vector<LabelRow> labels;
  for (int k = 0; k < count; ++k)
    labels.push_back({k % images, k % kTinyClasses, float(random.value(0.1, 0.9)),
                      float(random.value(0.1, 0.9)), float(random.value(0.05, 0.5)),
                      float(random.value(0.05, 0.5))});
  return labels;
}

LossOptions tiny_loss_options() {
  return {scale_loss_gains({}, 3, kTinyClasses, kTinyImageSize), kTinyClasses};
}

namespace {

// ---- training steps --------------------------------------------------------------------------

// The trainer's step (models/train/solver.h) for the tiny model, a batch of 4 per step, at
// iterations past YOLOv5's warm-up (100 iterations at least), where every parameter group moves
// with its learning rate (lr0 x lf: 0.005 here) and the full momentum.
constexpr int kTinyBatch = 4;
constexpr int64_t kFirstIteration = 100;
SolverOptions tiny_solver_options() {
  return {.epochs = 2 * kFirstIteration,
          .batches_per_epoch = 1,
          .batch = kTinyBatch,
          .nbs = kTinyBatch,
          .loss = tiny_loss_options()};
}

// The tiny model on the DUT in float beside the reference in double from the same initial
// state, each stepped by a Solver, both on one batch of random images and labels.
class TinyTraining {
 public:
  explicit TinyTraining(const Device& dut)
      : model_(tiny_config(), {.nc = kTinyClasses, .seed = 7, .device = dut}),
        reference_(tiny_config(), {.nc = kTinyClasses, .seed = 7, .dtype = DType::f64}),
        solver_(model_, tiny_solver_options()),
        reference_solver_(reference_, tiny_solver_options()),
        state_(model_.state()),
        reference_state_(reference_.state()) {
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i].value->dtype() == DType::f32)
        reference_state_[i].value->copy_from(in_double(*state_[i].value));
    Random random(80);
    const Tensor images = random.uniform({kTinyBatch, 3, kTinyImageSize, kTinyImageSize}, 0, 1);
    images_ = images.to(dut);
    images_in_double_ = in_double(images);
    labels_ = random_labels(random, kTinyBatch, 6);
  }

  // Forward, loss and backward of both models; returns their total losses (DUT, reference).
  std::pair<double, double> forward_backward() {
    return {read_loss(solver_.forward_backward(images_, labels_)).total,
            read_loss(reference_solver_.forward_backward(images_in_double_, labels_)).total};
  }

  // A whole step of both (forward, loss, backward, the update); returns their total losses.
  std::pair<double, double> step() {
    const int64_t iteration = kFirstIteration + steps_++;
    return {read_loss(solver_.step(images_, labels_, iteration).loss).total,
            read_loss(reference_solver_.step(images_in_double_, labels_, iteration).loss).total};
  }

  // The worst error over every parameter's gradient and every buffer (BatchNorm's running
  // statistics, the anchors), each against its reference.
  double state_error() const {
    double worst = 0;
    for (size_t i = 0; i < state_.size(); ++i) {
      const StateEntry &e = state_[i], &r = reference_state_[i];
      if (e.value->dtype() != DType::f32) continue;  // the step counters
      worst =
          std::max(worst, e.trainable() ? max_error(e.grad->to_doubles(), r.grad->to_doubles())
                                        : max_error(e.value->to_doubles(), r.value->to_doubles()));
    }
    return worst;
  }

 private:
  DetectionModel model_, reference_;
  Solver solver_, reference_solver_;
  std::vector<StateEntry> state_, reference_state_;
  Tensor images_, images_in_double_;
  std::vector<LabelRow> labels_;
  int64_t steps_ = 0;
};

// One step's gradients, and the running statistics its forward left.
double check_training_gradients(const Device& dut) {
  TinyTraining training(dut);
  training.forward_backward();
  return training.state_error();
}

// The losses of three steps: the later ones see the parameters the optimizer moved.
double check_training_losses(const Device& dut) {
  TinyTraining training(dut);
  std::vector<double> losses, reference_losses;
  for (int step = 0; step < 3; ++step) {
    const auto [loss, reference] = training.step();
    losses.push_back(loss);
    reference_losses.push_back(reference);
  }
  return max_error(losses, reference_losses);
}

}  // namespace

std::vector<Check> training_checks() {
  return {
      {"training", "yolov5-tiny: gradients of a step", kTinyGradients, check_training_gradients},
      {"training", "yolov5-tiny: losses of 3 SGD steps", kTinyLosses, check_training_losses},
  };
}

}  // namespace bareyolo::selftest

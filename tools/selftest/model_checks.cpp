// tools/selftest/model_checks.cpp — the selftest's checks of what the model adds to the
// kernels (see selftest.h): the Detect decode, NMS, the YOLOv5 loss, and training steps of the
// tiny model; then their half of the table.
#include <span>
#include <string>
#include <utility>

#include "engine/shipped_files.h"
#include "models/eval/decode.h"
#include "models/eval/nms.h"
#include "models/eval/validate.h"
#include "models/loss/head_loss.h"
#include "models/train/solver.h"
#include "models/yolo/model_config.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

using namespace bareyolo::models;  // the model, its loss and evaluation under check

namespace {

// ---- decode, NMS, loss: on the tiny model's head ---------------------------------------------

constexpr int kTinyClasses = 2, kTinyImageSize = 64;

ModelConfig tiny_config() { return load_model_config(shipped_file("models/yolov5-tiny.yaml")); }

// Random raw head outputs of `model` for `images` images of kTinyImageSize pixels.
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

template <class T>
std::vector<double> doubles(const std::vector<T>& values) {
  return {values.begin(), values.end()};
}

// The decoded rows of `head` computed on `dut` (the decode kernel on a GPU), poisoned first.
std::vector<float> decode_on(const Device& dut, const std::vector<Tensor>& head,
                             const DetectionModel& model) {
  const int64_t count =
      head[0].shape().n * decoded_rows_per_image(head, model) * model.outputs_per_anchor();
  Tensor rows = poisoned({1, 1, 1, count}).to(dut);
  decode_predictions(on_device(head, dut), model, rows.view<float>());
  return rows.to_vector<float>();
}

// The decode has no double form: its reference is the host decode, which the GPU's matches
// within its expf's ulps (on the CPU the two are the same code).
double check_detect_decode(const Device& dut) {
  const DetectionModel model(tiny_config(), {.nc = kTinyClasses});
  Random random(60);
  const std::vector<Tensor> head = random_head(model, random, 2, -6, 6);
  return max_error(doubles(decode_on(dut, head, model)),
                   doubles(decode_predictions(head, model).to_vector<float>()));
}

// One image's detections from its decoded rows, on `dut` (NMS's kernels on a GPU).
std::vector<Detection> nms_on(const Device& dut, std::span<const float> rows, int classes,
                              const NmsOptions& options) {
  const Tensor on_dut = Tensor::from_vector(std::vector<float>(rows.begin(), rows.end()),
                                            {1, 1, 1, int64_t(rows.size())}, dut);
  return batch_detections(on_dut.view<float>(), 1, classes, options).front();
}

std::vector<double> flatten(const std::vector<Detection>& detections) {
  std::vector<double> values;
  for (const Detection& d : detections)
    values.insert(values.end(),
                  {d.box.x1, d.box.y1, d.box.x2, d.box.y2, d.conf, double(d.class_id)});
  return values;
}

// Validation's NMS (conf 0.001, IoU 0.6, multi-label) of the same rows on both sides: the GPU
// runs the host's float operations in the same order, so the detections must be identical.
double check_nms(const Device& dut) {
  const DetectionModel model(tiny_config(), {.nc = kTinyClasses});
  Random random(61);
  const int64_t images = 2;
  const std::vector<float> rows =
      decode_predictions(random_head(model, random, images, -4, 4), model).to_vector<float>();
  const size_t per_image = rows.size() / size_t(images);
  const NmsOptions options = validation_nms();
  double worst = 0;
  for (int64_t image = 0; image < images; ++image) {
    const std::span<const float> own(rows.data() + size_t(image) * per_image, per_image);
    const std::vector<Detection> got = nms_on(dut, own, kTinyClasses, options);
    const std::vector<Detection> want = non_max_suppression(own, kTinyClasses, options);
    if (got.size() != want.size())
      throw std::runtime_error("non_max_suppression on " + dut.str() + " kept " +
                               std::to_string(got.size()) + " detections of image " +
                               std::to_string(image) + ", the CPU " + std::to_string(want.size()));
    worst = std::max(worst, max_error(flatten(got), flatten(want)));
  }
  return worst;
}

// Labels spread over the images and classes (normalised centres and sizes, YOLOv5's rows).
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

std::vector<double> loss_values(const LossValues& v) { return {v.box, v.obj, v.cls, v.total}; }

// head_loss of a head on the DUT (the device loss on a GPU) against the reference: the four
// values and the gradient of every level.
double check_yolo_loss(const Device& dut) {
  const DetectionModel model(tiny_config(), {.nc = kTinyClasses});
  Random random(70);
  const int images = 4;
  const std::vector<Tensor> head = random_head(model, random, images, -4, 4);
  const LossOptions options = tiny_loss_options();
  const LevelTargets targets =
      head_targets(model, head, random_labels(random, images, 24), options);
  const LossNormalization norm = local_normalization(targets, images);
  const HeadLoss got = head_loss(on_device(head, dut), targets, norm, options);
  std::vector<Tensor> head_in_double;
  for (const Tensor& h : head) head_in_double.push_back(in_double(h));
  const HeadLoss want = head_loss(head_in_double, targets, norm, options);  // the host's, in double
  double worst = max_error(loss_values(got.values), loss_values(want.values));
  for (size_t level = 0; level < head.size(); ++level)
    worst = std::max(
        worst, max_error(got.gradients[level].to_doubles(), want.gradients[level].to_doubles()));
  return worst;
}

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
    return {solver_.forward_backward(images_, labels_).total,
            reference_solver_.forward_backward(images_in_double_, labels_).total};
  }

  // A whole step of both (forward, loss, backward, the update); returns their total losses.
  std::pair<double, double> step() {
    const int64_t iteration = kFirstIteration + steps_++;
    return {solver_.step(images_, labels_, iteration).loss.total,
            reference_solver_.step(images_in_double_, labels_, iteration).loss.total};
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

std::vector<Check> model_checks() {
  return {
      {"detect", "Detect decode", 1e-5, check_detect_decode},
      {"detect", "non_max_suppression", 0, check_nms},
      {"loss", "YOLOv5 loss (head_loss)", 1e-5, check_yolo_loss},
      {"training", "yolov5-tiny: gradients of a step", 1e-2, check_training_gradients},
      {"training", "yolov5-tiny: losses of 3 SGD steps", 1e-3, check_training_losses},
  };
}

}  // namespace bareyolo::selftest

// tests/unit/golden.cpp — bareyolo against PyTorch YOLOv5's own numbers, with no Python here:
// tests/fixtures/golden/yolov5-tiny-64.safetensors (made by tools/make_golden_fixture.py)
// holds yolov5-tiny's initial weights as YOLOv5 initialised them, a batch of 2 images at 64 px,
// and the float64 reference of the loss, every parameter gradient, and every parameter and
// BatchNorm buffer after 3 plain SGD steps on that batch.
//
// Tolerances, norm-wise relative per tensor: the loss components 1e-5 (PyTorch's own float32
// gets 1e-6); each tensor at most kTimesTorch times as far from the reference as PyTorch's own
// float32 run lands on that tensor (recorded in the fixture), or kFloor, whichever is larger.
// A tensor whose values are tiny beside its neighbours' (BatchNorm biases deep in the head)
// carries their float32 rounding in both engines, which is why the limit follows PyTorch's
// own error tensor by tensor rather than being one number; a wrong gradient anywhere is
// wrong by far more than either.
#include <algorithm>
#include <cmath>
#include <string>

#include "engine/optim/sgd.h"
#include "engine/parameter_arena.h"
#include "engine/safetensors.h"
#include "engine/shipped_files.h"
#include "models/loss/gradient_report.h"
#include "models/train/step.h"
#include "models/yolo/model_config.h"
#include "models/yolo/weights.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {

constexpr double kLossLimit = 1e-5, kTimesTorch = 4, kFloor = 1e-4;

double relative(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    diff += (got[k] - want[k]) * (got[k] - want[k]);
    norm += want[k] * want[k];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

std::vector<double> doubles_of(const SafetensorsFile& file, const std::string& name) {
  return file.tensor(name).to_doubles();
}

// Checks `got` against the record `kind`.<name> within its tensor's limit; returns how close
// the tensor came to its limit (error / limit).
double check_tensor(const SafetensorsFile& golden, const std::string& kind, const std::string& name,
                    const Tensor& got) {
  const std::vector<double> want = doubles_of(golden, kind + "." + name);
  REQUIRE(got.numel() == int64_t(want.size()));
  const double torch_error = doubles_of(golden, "torch_f32_error." + kind + "." + name).at(0);
  const double limit = std::max(kFloor, kTimesTorch * torch_error);
  const double error = relative(got.to_doubles(), want);
  CHECK_MESSAGE(error <= limit, kind << "." << name << ": " << error << " > " << limit
                                     << " (PyTorch float32: " << torch_error << ")");
  return error / limit;
}

// The fixture's model with its weights, its batch and its loss options.
struct Golden {
  std::string path = shipped_file("tests/fixtures/golden/yolov5-tiny-64.safetensors");
  SafetensorsFile file = SafetensorsFile::load(path);
  int nc = std::stoi(file.metadata().at("nc"));
  int imgsz = std::stoi(file.metadata().at("imgsz"));
  DetectionModel model{load_model_config(shipped_file(file.metadata().at("cfg"))), {.nc = nc}};
  Tensor images = file.tensor("images");
  std::vector<LabelRow> labels = label_rows(file, "targets", path, 2, nc);

  Golden() {
    load_state(file, model.state(), path, "weights.");
    REQUIRE(images.shape() == Shape4{2, 3, imgsz, imgsz});
    REQUIRE(labels.size() == 6);
  }
};

// The loss values in the fixture's order: total, box, obj, cls.
void check_loss(const SafetensorsFile& golden, const std::vector<double>& got) {
  const std::vector<double> want = golden.values<double>("loss");
  for (size_t k = 0; k < 4; ++k) {
    CAPTURE(k);  // total, box, obj, cls
    CHECK(std::fabs(got[k] - want[k]) <= kLossLimit * std::fabs(want[k]));
  }
}

size_t records_named(const SafetensorsFile& file, const std::string& prefix) {
  return size_t(std::count_if(file.records().begin(), file.records().end(),
                              [&](const TensorRecord& r) { return r.name.rfind(prefix, 0) == 0; }));
}

}  // namespace

TEST_CASE("golden: yolov5-tiny's loss, gradients and 3 SGD steps equal PyTorch YOLOv5's") {
  Golden fixture;
  const SafetensorsFile& golden = fixture.file;
  DetectionModel& model = fixture.model;
  const Tensor& images = fixture.images;
  const std::vector<LabelRow>& labels = fixture.labels;
  const std::vector<StateEntry> state = model.state();
  const double lr = std::stod(golden.metadata().at("lr"));
  const double momentum = std::stod(golden.metadata().at("momentum"));
  const int steps = std::stoi(golden.metadata().at("steps"));
  const LossOptions loss{scale_loss_gains({}, model.num_levels(), fixture.nc, fixture.imgsz),
                         fixture.nc};

  ParameterArena arena(state);
  Sgd sgd(arena, lr, momentum, /*weight_decay=*/0.0, /*nesterov=*/false);
  sgd.zero_grad();
  const LossValues values = read_loss(forward_backward(model, images, labels, loss));

  // The first step: the loss and every gradient.
  check_loss(golden, {values.total, values.box, values.obj, values.cls});
  double closest = 0;
  int gradients = 0;
  for (const StateEntry& entry : state) {
    if (!entry.trainable()) continue;
    closest = std::max(closest, check_tensor(golden, "grad", entry.name, *entry.grad));
    ++gradients;
  }
  // Every parameter of yolov5-tiny was compared.
  CHECK(size_t(gradients) == records_named(golden, "grad."));

  // Then the steps: the first with these gradients, the others on the same batch.
  for (int step = 0; step < steps; ++step) {
    if (step > 0) {
      sgd.zero_grad();
      forward_backward(model, images, labels, loss);
    }
    sgd.step();
  }
  int compared = 0;
  for (const StateEntry& entry : state) {
    if (entry.value->dtype() == DType::i64) {  // num_batches_tracked: one per forward
      CHECK(entry.value->to_vector<int64_t>() == golden.values<int64_t>("after." + entry.name));
      continue;
    }
    closest = std::max(closest, check_tensor(golden, "after", entry.name, *entry.value));
    ++compared;
  }
  CHECK(compared + 1 > gradients);  // the parameters, BatchNorm's statistics, the anchors
  MESSAGE("golden: the closest tensor used " << closest << " of its limit");
}

// `bareyolo grads` writes what tools/check_against_yolov5.py compares with PyTorch: the same
// numbers as above, in the report's layout. A second report on the same model is the same
// report (its gradients are not added to the first's).
TEST_CASE("golden: the gradient report holds PyTorch YOLOv5's loss and gradients, each time") {
  Golden fixture;
  for (int report_number = 1; report_number <= 2; ++report_number) {
    CAPTURE(report_number);
    const SafetensorsFile report =
        gradient_report(fixture.model, fixture.images, fixture.labels, LossHyp{});
    const std::vector<float> loss = report.values<float>("loss");  // box, obj, cls
    check_loss(fixture.file,
               {report.values<float>("loss_total").at(0), loss.at(0), loss.at(1), loss.at(2)});
    REQUIRE(records_named(report, "grad.") == records_named(fixture.file, "grad."));
    for (const TensorRecord& record : report.records())
      if (record.name.rfind("grad.", 0) == 0)
        check_tensor(fixture.file, "grad", record.name.substr(5), report.tensor(record.name));
  }
}

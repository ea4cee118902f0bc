// tests/unit/gradient_report.cpp — the golden-check file of `bareyolo grads`: its names,
// shapes and consistency with the loss and the parameters (the comparison with PyTorch
// YOLOv5 itself is tools/check_against_yolov5.py, which needs PyTorch); and weights that
// go to a safetensors file and back unchanged, or fail whole.
#include <cstdio>
#include <map>

#include "engine/shipped_files.h"
#include "models/loss/gradient_report.h"
#include "models/yolo/weights.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {
DetectionModel tiny(int nc, uint64_t seed = 0) {
  return DetectionModel(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = nc, .seed = seed});
}
}  // namespace

TEST_CASE("gradient report holds YOLOv5's loss head layout and every parameter gradient") {
  DetectionModel model = tiny(3);
  Rng rng(121);
  Tensor images =
      Tensor::from_vector(random_vector<float>(rng, 2 * 3 * 64 * 64, 0, 1), {2, 3, 64, 64});
  std::vector<LabelRow> labels = {{0, 1, 0.5f, 0.5f, 0.3f, 0.2f}, {1, 2, 0.2f, 0.7f, 0.1f, 0.3f}};
  SafetensorsFile report = gradient_report(model, images, labels, LossHyp{});

  CHECK(report.record("loss").shape == std::vector<int64_t>{3});
  CHECK(report.record("loss_total").shape == std::vector<int64_t>{1});
  CHECK(report.record("p3").shape == std::vector<int64_t>{2, 3, 8, 8, 8});
  CHECK(report.record("p4").shape == std::vector<int64_t>{2, 3, 4, 4, 8});
  CHECK(report.record("p5").shape == std::vector<int64_t>{2, 3, 2, 2, 8});
  std::vector<float> loss = report.values<float>("loss");
  CHECK(report.values<float>("loss_total")[0] ==
        doctest::Approx((loss[0] + loss[1] + loss[2]) * 2).scale(0).epsilon(1e-6));
  int gradients = 0;
  for (const StateEntry& e : model.state()) {
    if (!e.trainable()) continue;
    ++gradients;
    REQUIRE(report.contains("grad." + e.name));
    CHECK(report.record("grad." + e.name).shape == e.dims);
  }
  CHECK(report.records().size() == size_t(5 + gradients));
  // The head in YOLOv5's layout: p3[b, a, y, x, k] = raw[b, a * 8 + k, y, x].
  std::vector<float> p3 = report.values<float>("p3");
  std::vector<float> raw = model.graph().output_of(model.graph().size() - 3).to_vector<float>();
  CHECK(p3[((((1 * 3 + 2) * 8 + 5) * 8 + 6) * 8) + 4] ==
        raw[(((1 * 24 + 2 * 8 + 4) * 8 + 5) * 8) + 6]);
}

TEST_CASE("weights round trip through safetensors and a mismatched file changes nothing") {
  DetectionModel source = tiny(2, 7), target = tiny(2, 8);
  SafetensorsFile file;
  add_state(file, source.state());
  load_state(SafetensorsFile::parse(file.serialize(), "memory"), target.state(), "memory");
  std::vector<StateEntry> a = source.state(), b = target.state();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].value->to_doubles() == b[i].value->to_doubles());

  DetectionModel other_nc = tiny(5, 9);
  const std::vector<double> before = other_nc.state()[0].value->to_doubles();
  CHECK_THROWS_WITH_AS(load_state(file, other_nc.state(), "w.safetensors"),
                       doctest::Contains("w.safetensors: 'model.24.m.0.weight' has shape"),
                       std::invalid_argument);
  CHECK(other_nc.state()[0].value->to_doubles() == before);  // untouched
}

TEST_CASE("rows from outside the loader are refused by row before they index anything") {
  // Before: an image index of 99 or -5 read and wrote outside the head (a segfault or a
  // corrupt heap in `bareyolo grads`).
  DetectionModel model = tiny(3);
  Rng rng(122);
  Tensor images =
      Tensor::from_vector(random_vector<float>(rng, 2 * 3 * 64 * 64, 0, 1), {2, 3, 64, 64});
  const LabelRow good{0, 1, 0.5f, 0.5f, 0.3f, 0.2f};
  const float nan = std::nanf("");
  struct BadRow {
    LabelRow row;
    std::string message;
  };
  const std::vector<BadRow> bad = {
      {{99, 0, 0.5f, 0.5f, 0.3f, 0.2f}, "image 99 is not one of the batch's 2 images"},
      {{-5, 0, 0.5f, 0.5f, 0.3f, 0.2f}, "image -5 is not one of the batch's 2 images"},
      {{1, 3, 0.5f, 0.5f, 0.3f, 0.2f}, "class 3 is not one of the model's 3 classes"},
      {{1, -1, 0.5f, 0.5f, 0.3f, 0.2f}, "class -1 is not one of the model's 3 classes"},
      {{1, 0, nan, 0.5f, 0.3f, 0.2f}, "the box (nan, 0.500000, 0.300000, 0.200000) is not finite"},
      {{1, 0, 0.5f, 0.5f, -0.3f, 0.2f}, "the box (0.500000, 0.500000, -0.300000, 0.200000)"}};
  for (const BadRow& b : bad) {
    INFO(b.message);
    CHECK_THROWS_WITH_AS(
        gradient_report(model, images, {good, b.row}, LossHyp{}),
        doctest::Contains(("label row 1 (image, class, cx, cy, w, h): " + b.message).c_str()),
        std::invalid_argument);
  }

  // `bareyolo grads` reads its rows from a file: the image and class columns must be whole.
  SafetensorsFile batch;
  batch.add_values<float>("targets",
                          {0, 1, 0.5f, 0.5f, 0.3f, 0.2f, 1.5f, 0, 0.5f, 0.5f, 0.3f, 0.2f}, {2, 6});
  CHECK_THROWS_WITH_AS(label_rows(batch, "targets", "batch.safetensors", 2, 3),
                       doctest::Contains("batch.safetensors: 'targets' row 1: image 1.5"),
                       std::invalid_argument);
  batch.add_values<float>("far", {1e20f, 0, 0.5f, 0.5f, 0.3f, 0.2f}, {1, 6});
  CHECK_THROWS_WITH_AS(label_rows(batch, "far", "batch.safetensors", 2, 3),
                       doctest::Contains("is not a whole number"), std::invalid_argument);
  batch.add_values<float>("wide", {7, 0, 0.5f, 0.5f, 0.3f, 0.2f}, {1, 6});
  CHECK_THROWS_WITH_AS(label_rows(batch, "wide", "batch.safetensors", 2, 3),
                       doctest::Contains("batch.safetensors: 'wide' label row 0"),
                       std::invalid_argument);
  batch.add_values<float>("valid", {1, 2, 0.25f, 0.5f, 0.3f, 0.2f}, {1, 6});
  const std::vector<LabelRow> valid = label_rows(batch, "valid", "batch.safetensors", 2, 3);
  REQUIRE(valid.size() == 1);
  CHECK(valid[0].image == 1);
  CHECK(valid[0].class_id == 2);
  CHECK(valid[0].cx == 0.25f);
}

// tests/unit/model_anchors.cpp — a model's anchors (issue 55): kept as YOLOv5 keeps them
// (levels in stride order, grid units, fp16), YOLOv5's `anchors: N` placeholders in a model
// yaml, and a model yaml rewritten with other anchors, as a run's weights carry it.
#include "engine/shipped_files.h"
#include "models/yolo/model_config.h"
#include "models/yolo/weights.h"
#include "models/yolo/yolo_model.h"
#include "tests/support/testing.h"

using namespace bareyolo;

namespace {

// The shipped yolov5-tiny yaml with its anchors line block replaced by `anchors_yaml`.
std::string tiny_yaml_with(const std::string& anchors_yaml) {
  const models::ModelConfig tiny = models::load_model_config("models/yolov5-tiny.yaml");
  std::string text = tiny.yaml_text;
  const size_t begin = text.find("anchors:");
  const size_t end = text.find("\n\n", begin);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  return text.replace(begin, end - begin, anchors_yaml);
}

}  // namespace

TEST_CASE("set_anchors: levels in stride order, divided by the strides, at fp16 precision") {
  models::DetectionModel model(models::load_model_config("models/yolov5-tiny.yaml"));
  // Largest first: check_anchor_order reverses the levels.
  model.set_anchors(
      {{116, 90, 156, 198, 373, 326}, {30, 61, 62, 45, 59, 119}, {10.3, 13, 16, 30, 33, 23}});
  CHECK(model.anchor(0, 0) == std::array<double, 2>{1.287109375, 1.625});  // 10.3/8 in fp16
  CHECK(model.anchor(2, 2) == std::array<double, 2>{11.65625, 10.1875});
  CHECK(model.pixel_anchors()[0][0] == 10.296875);
  CHECK_THROWS_AS(model.set_anchors({{10, 13}}), std::invalid_argument);
}

TEST_CASE("anchors: N in a model yaml builds YOLOv5's placeholders") {
  const models::ModelConfig config =
      models::parse_model_config(tiny_yaml_with("anchors: 2"), "two.yaml");
  CHECK(config.placeholder_anchors);
  REQUIRE(config.anchors.size() == 3);  // the Detect row's three inputs
  CHECK(config.anchors[2] == std::vector<double>{0, 1, 2, 3});
  models::DetectionModel model(config);
  CHECK(model.num_anchors() == 2);
  CHECK(model.anchor(1, 1) == std::array<double, 2>{2.0 / 16, 3.0 / 16});
  CHECK_THROWS_WITH_AS(models::parse_model_config(tiny_yaml_with("anchors: 0"), "zero.yaml"),
                       doctest::Contains("zero.yaml: anchors is 0 anchors per level; give 1 to 16"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(models::parse_model_config(tiny_yaml_with("anchors: many"), "x.yaml"),
                       doctest::Contains("x.yaml: anchors must be a number"),
                       std::invalid_argument);
}

TEST_CASE("yaml_text_with_anchors: the model it builds has those anchors, the rest unchanged") {
  const models::ModelConfig tiny = models::load_model_config("models/yolov5-tiny.yaml");
  const std::vector<std::vector<double>> anchors = {
      {4.5, 6, 8, 9.25, 11, 12}, {20, 22, 30, 33, 40, 41}, {60, 70, 90, 99.5, 200, 180.125}};
  const models::ModelConfig back =
      models::parse_model_config(models::yaml_text_with_anchors(tiny, anchors), "back");
  CHECK(back.anchors == anchors);
  CHECK_FALSE(back.placeholder_anchors);
  REQUIRE(back.rows.size() == tiny.rows.size());
  CHECK(back.rows.back().module == "Detect");
  CHECK(back.width_multiple == tiny.width_multiple);
  models::DetectionModel a(tiny), b(back);
  CHECK(a.parameter_count() == b.parameter_count());

  // A YOLOv5 checkpoint's yaml is one flow map (torch_checkpoint.h): the same there.
  const models::ModelConfig torch = models::weights_model_config(
      models::load_weights_file(shipped_file("tests/fixtures/torch/best.pt")), "best.pt", "");
  const std::string torch_text = models::yaml_text_with_anchors(torch, anchors);
  CHECK(models::parse_model_config(torch_text, "torch").anchors == anchors);
  CHECK(models::parse_model_config(torch_text, "torch").rows.size() == torch.rows.size());
}

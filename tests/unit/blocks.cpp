// tests/unit/blocks.cpp — YOLOv5's Bottleneck, C3 and SPPF: state names in YOLOv5's order,
// output shapes, backward against finite differences through the whole block, and backward
// writing its input's gradient where told to.
#include "models/yolo/blocks.h"
#include "tests/unit/module_check.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {
std::vector<std::string> state_names(Module& m, const std::string& prefix) {
  std::vector<StateEntry> state;
  m.collect_state(prefix, state);
  std::vector<std::string> names;
  for (auto& e : state) names.push_back(e.name);
  return names;
}
}  // namespace

TEST_CASE("C3 state follows YOLOv5's registration order") {
  std::mt19937_64 init(1);
  BlockContext context{init, kYolov5Bn, Device::cpu(), DType::f32};
  C3 block(32, 32, 2, true, context);
  std::vector<std::string> names = state_names(block, "model.2.");
  REQUIRE(names.size() == 7 * 6);
  CHECK(names[0] == "model.2.cv1.conv.weight");
  CHECK(names[6] == "model.2.cv2.conv.weight");
  CHECK(names[12] == "model.2.cv3.conv.weight");
  CHECK(names[18] == "model.2.m.0.cv1.conv.weight");
  CHECK(names[24] == "model.2.m.0.cv2.conv.weight");
  CHECK(names[41] == "model.2.m.1.cv2.bn.num_batches_tracked");
  const Shape4 in = {2, 32, 8, 8};
  CHECK(block.output_shape(std::array{in}) == Shape4{2, 32, 8, 8});
}

TEST_CASE("Bottleneck backward matches finite differences with and without shortcut") {
  Rng rng(81);
  for (bool shortcut : {true, false}) {
    std::mt19937_64 init(2);
    BlockContext context{init, kYolov5Bn, Device::cpu(), DType::f64};
    Bottleneck block(4, 4, shortcut, 0.5, context);
    check_module_gradients(block, {{2, 4, 5, 4}}, Mode::train, rng);
  }
}

TEST_CASE("C3 backward matches finite differences") {
  Rng rng(82);
  for (bool shortcut : {true, false}) {
    std::mt19937_64 init(3);
    BlockContext context{init, kYolov5Bn, Device::cpu(), DType::f64};
    C3 block(6, 4, 2, shortcut, context);
    check_module_gradients(block, {{2, 6, 4, 5}}, Mode::train, rng);
  }
}

TEST_CASE("SPPF backward matches finite differences") {
  Rng rng(83);
  std::mt19937_64 init(4);
  BlockContext context{init, kYolov5Bn, Device::cpu(), DType::f64};
  SPPF block(8, 6, 5, context);
  CHECK(state_names(block, "").size() == 12);
  // YOLOv5's SPPF halves its input's channels (8 -> 4), pools them three times and brings the
  // four concatenated (16) to its output's 6.
  std::vector<StateEntry> state;
  block.collect_state("", state);
  CHECK(state[0].name == "cv1.conv.weight");
  CHECK(state[0].dims == std::vector<int64_t>{4, 8, 1, 1});
  CHECK(state[6].name == "cv2.conv.weight");
  CHECK(state[6].dims == std::vector<int64_t>{6, 16, 1, 1});
  check_module_gradients(block, {{2, 8, 6, 5}}, Mode::train, rng);
}

TEST_CASE("Bottleneck, C3 and SPPF backward told to overwrite write what they add into zeros") {
  Rng rng(84);
  std::mt19937_64 init(5);
  BlockContext context{init, kYolov5Bn, Device::cpu(), DType::f64};
  for (bool shortcut : {true, false}) {
    CAPTURE(shortcut);
    Bottleneck bottleneck(4, 4, shortcut, 0.5, context);
    check_overwrite_matches_add(bottleneck, {2, 4, 5, 4}, Mode::train, rng);
    C3 c3(6, 4, 2, shortcut, context);
    check_overwrite_matches_add(c3, {2, 6, 4, 5}, Mode::train, rng);
  }
  SPPF sppf(8, 6, 5, context);
  check_overwrite_matches_add(sppf, {2, 8, 6, 5}, Mode::train, rng);
}

// tools/selftest/detect_checks.cpp — validation's Detect decode and NMS on the DUT against the
// CPU's (see selftest.h; tolerances: the top of selftest.cpp), formerly tests/cuda/decode.cpp
// and nms.cpp. Neither has a double form: the reference is the host's float code, which a GPU
// follows with the same formulas, float operations and row order (models/eval/detect_cuda.h),
// its expf within a few ulps of glibc's. The decode of a three-level head and of the tiny
// model's; NMS of the same rows on both sides, bit for bit, in six variants; and detect (decode,
// then NMS) of a head with few, well separated candidates, so that no near tie can reorder them.
// (Greedy NMS, a step of the GPU's NMS with no device-neutral entry, stays a CUDA test case:
// tests/cuda/nms.cpp.)
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "models/eval/decode.h"
#include "models/eval/nms.h"
#include "models/eval/validate.h"
#include "models/yolo/model_config.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

using namespace bareyolo::models;  // the model's evaluation under check

namespace {

// Three strided convs give the P3/8, P4/16 and P5/32 levels; YOLOv5's default anchors.
constexpr const char* kThreeLevelModel = R"(
nc: 3
depth_multiple: 1.0
width_multiple: 1.0
anchors:
  - [10,13, 16,30, 33,23]
  - [30,61, 62,45, 59,119]
  - [116,90, 156,198, 373,326]
backbone:
  - [-1, 1, Conv, [8, 3, 8]]
  - [-1, 1, Conv, [8, 3, 2]]
  - [-1, 1, Conv, [8, 3, 2]]
head:
  - [[0, 1, 2], 1, Detect, [nc, anchors]]
)";

constexpr const char* kTwoLevelModel = R"(
nc: 3
depth_multiple: 1.0
width_multiple: 1.0
anchors:
  - [10,13, 16,30, 33,23]
  - [30,61, 62,45, 59,119]
backbone:
  - [-1, 1, Conv, [8, 3, 8]]
  - [-1, 1, Conv, [8, 3, 2]]
head:
  - [[0, 1], 1, Detect, [nc, anchors]]
)";

// ---- the decode --------------------------------------------------------------------------------

// decode_predictions of `head` into rows poisoned first, on the DUT and on the CPU.
double decode_case(const Device& dut, const DetectionModel& model,
                   const std::vector<Tensor>& head) {
  const int64_t count =
      head[0].shape().n * decoded_rows_per_image(head, model) * model.outputs_per_anchor();
  return compare_with_cpu(dut, head, {poisoned({1, 1, 1, count})}, [&](Tensors& in, Tensors& out) {
    decode_predictions(in, model, as<float>(out[0]));
  });
}

double check_decode(const Device& dut) {
  // Two images of random logits in [-6, 6] on a three-level head of 12x12, 6x6 and 3x3 cells.
  const DetectionModel three_levels(parse_model_config(kThreeLevelModel, "three-level model"));
  Random random(91);
  std::vector<Tensor> head;
  for (int64_t size : {12, 6, 3})
    head.push_back(random.uniform(
        {2, three_levels.num_anchors() * three_levels.outputs_per_anchor(), size, size}, -6, 6));
  // And the tiny model's head.
  const DetectionModel tiny(tiny_config(), {.nc = kTinyClasses});
  Random tiny_random(60);
  return std::max(decode_case(dut, three_levels, head),
                  decode_case(dut, tiny, random_head(tiny, tiny_random, 2, -6, 6)));
}

// ---- NMS ---------------------------------------------------------------------------------------

std::vector<double> flatten(const std::vector<Detection>& detections) {
  std::vector<double> values;
  for (const Detection& d : detections)
    values.insert(values.end(),
                  {d.box.x1, d.box.y1, d.box.x2, d.box.y2, d.conf, double(d.class_id)});
  return values;
}

// The worst error of the DUT's detections of each image against the CPU's; a different count
// fails the check, naming the image.
double detections_error(const Device& dut, const std::vector<std::vector<Detection>>& got,
                        const std::vector<std::vector<Detection>>& want) {
  double worst = 0;
  for (size_t image = 0; image < want.size(); ++image) {
    if (got.at(image).size() != want[image].size())
      throw std::runtime_error("on " + dut.str() + " image " + std::to_string(image) + " kept " +
                               std::to_string(got[image].size()) + " detections, on the CPU " +
                               std::to_string(want[image].size()));
    worst = std::max(worst, max_error(flatten(got[image]), flatten(want[image])));
  }
  return worst;
}

// Decoded rows [cx, cy, w, h, obj, class scores] of clustered boxes; every 10th row repeats an
// earlier row's scores (tied candidates) and some repeat it whole.
std::vector<float> random_rows(Random& random, int64_t count, int classes) {
  const int outputs = 5 + classes;
  std::vector<float> rows;
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<double> u = random.values(outputs + 1, 0, 1);
    std::vector<float> row = {float(60 * std::floor(u[0] * 8) + 15 * u[1]), float(40 + 15 * u[2]),
                              float(8 + 40 * u[3]), float(8 + 40 * u[4]), float(u[5] * u[5])};
    for (int c = 0; c < classes; ++c) row.push_back(float(u[size_t(6 + c)]));
    if (i > 0 && u[0] < 0.1) {  // an earlier row's scores, or all of it
      const int64_t j = int64_t(u[1] * double(i));
      const auto earlier = rows.begin() + j * outputs;
      const int from = u[2] < 0.5 ? 0 : 4;  // the whole row, or its scores
      std::copy(earlier + from, earlier + outputs, row.begin() + from);
    }
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

// The same rows through batch_detections on the DUT and non_max_suppression on the host: the
// same detections bit for bit, for 1, 70 and 900 rows, with tied scores, multi- and single-label,
// a class filter, agnostic, a small max_nms and max_det.
double check_nms(const Device& dut) {
  const int classes = 4;
  Random random(102);
  double worst = 0;
  for (int64_t count : {int64_t(1), int64_t(70), int64_t(900)}) {
    const std::vector<float> rows = random_rows(random, count, classes);
    const Tensor on_dut = Tensor::from_vector(rows, {1, 1, 1, int64_t(rows.size())}, dut);
    for (int variant = 0; variant < 6; ++variant) {
      NmsOptions options;
      options.conf_threshold = variant % 2 ? 0.25f : 0.001f;
      options.iou_threshold = variant < 3 ? 0.45f : 0.6f;
      options.multi_label = variant != 1;
      options.agnostic = variant == 2;
      if (variant == 3) options.classes = {0, 2};
      if (variant == 4) options.max_nms = 50;
      if (variant == 5) options.max_det = 7;
      worst = std::max(
          worst, detections_error(dut, batch_detections(on_dut.view<float>(), 1, classes, options),
                                  {non_max_suppression(rows, classes, options)}));
    }
  }
  return worst;
}

// detect() of a two-level head on the DUT against the same head on the host, with validation's
// NMS: objectness far below the threshold except at about 1 cell in 20.
double check_detect(const Device& dut) {
  const DetectionModel model(parse_model_config(kTwoLevelModel, "two-level model"));
  const int na = model.num_anchors(), no = model.outputs_per_anchor();
  const int64_t images = 2;
  Random random(103);
  std::vector<Tensor> head;
  for (int64_t size : {16, 8}) {
    const Shape4 shape{images, na * no, size, size};
    std::vector<float> logits = random.floats(shape.numel(), -3, 3);
    const std::vector<double> pick = random.values(shape.numel(), 0, 1);
    for (int64_t i = 0; i < images * na; ++i)
      for (int64_t cell = 0; cell < size * size; ++cell) {
        const size_t at = size_t((i * no + 4) * size * size + cell);
        if (pick[at] > 0.05) logits[at] = -20;
      }
    head.push_back(Tensor::from_vector(logits, shape));
  }
  const std::vector<std::vector<Detection>> want = detect(head, model, validation_nms());
  size_t total = 0;
  for (const std::vector<Detection>& kept : want) total += kept.size();
  if (total < 10)
    throw std::logic_error("the head gives " + std::to_string(total) +
                           " detections: too few for the comparison to cover real ones");
  return detections_error(dut, detect(on_device(head, dut), model, validation_nms()), want);
}

}  // namespace

std::vector<Check> detect_checks() {
  return {
      {"detect", "Detect decode (three-level, tiny)", kTranscendental, check_decode},
      {"detect", "non_max_suppression (six variants)", kExact, check_nms},
      {"detect", "detect: decode + NMS of a head", kTranscendental, check_detect},
  };
}

}  // namespace bareyolo::selftest

// tests/cuda/nms.cpp — NMS on the GPU against the CPU reference:
//  - greedy NMS with the IoU bit matrix and the walk on the GPU against models::greedy_nms: the
//    kept indices must be identical, for random boxes in clusters (many overlaps near every
//    threshold), exact duplicates, empty boxes, counts around the 64-box blocks, and max_keep
//    limits;
//  - the whole non_max_suppression of decoded rows (candidates, stable sort, max_nms cut,
//    class offsets, greedy NMS) against models::non_max_suppression on the same rows: the same
//    detections bit for bit, with tied scores, multi- and single-label, a class filter,
//    agnostic, small max_nms and max_det;
//  - models::detect (decode + NMS) of a head on the GPU against the same head on the host:
//    the same detections within float tolerance (the decodes differ by a few ulps of expf; the
//    head has few candidates with well separated scores, so no near tie can reorder them).
#include <algorithm>

#include "models/eval/detect_cuda.h"
#include "models/eval/nms.h"
#include "models/eval/validate.h"
#include "models/yolo/model_config.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {
std::vector<models::BoxXYXY> random_boxes(Rng& rng, int64_t count) {
  std::vector<models::BoxXYXY> boxes;
  const std::vector<double> u = random_vector(rng, 6 * count, 0, 1);
  for (int64_t i = 0; i < count; ++i) {
    const double* r = u.data() + 6 * i;
    // Ten cluster centres, sizes 10-60 px: neighbours overlap at every IoU.
    const float cx = float(100 * std::floor(r[0] * 10) + 20 * r[1]);
    const float cy = float(50 + 20 * r[2]), w = float(10 + 50 * r[3]), h = float(10 + 50 * r[4]);
    boxes.push_back({cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2});
    if (r[5] < 0.05) boxes.push_back(boxes.back());      // an exact duplicate
    if (r[5] > 0.97) boxes.push_back({cx, cy, cx, cy});  // an empty box
  }
  return boxes;
}
}  // namespace

TEST_CASE("cuda greedy nms keeps exactly the boxes the cpu keeps") {
  Rng rng(101);
  for (int64_t count : {1, 2, 63, 64, 65, 130, 1000, 3000}) {
    const std::vector<models::BoxXYXY> boxes = random_boxes(rng, count);
    std::vector<float> corners;
    for (const models::BoxXYXY& b : boxes) corners.insert(corners.end(), {b.x1, b.y1, b.x2, b.y2});
    const Tensor on_gpu =
        Tensor::from_vector(corners, {1, 1, 1, int64_t(corners.size())}, Device::cuda(0));
    for (float threshold : {0.0f, 0.3f, 0.45f, 0.7f, 1.0f})
      for (int64_t max_keep : {int64_t(1), int64_t(7), int64_t(300), int64_t(1) << 40}) {
        INFO(boxes.size() << " boxes, threshold " << threshold << ", max_keep " << max_keep);
        const std::vector<int64_t> expected = models::greedy_nms(boxes, threshold, max_keep);
        const std::vector<int64_t> kept = cuda::greedy_nms(
            on_gpu.view<float>().data, int64_t(boxes.size()), threshold, max_keep, 0);
        CHECK(kept == expected);
      }
  }
}

namespace {

// Decoded rows [cx, cy, w, h, obj, class scores] of clustered boxes; every 10th row repeats an
// earlier row's scores (tied candidates) and some repeat it whole.
std::vector<float> random_rows(Rng& rng, int64_t count, int classes) {
  const int outputs = 5 + classes;
  std::vector<float> rows;
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<double> u = random_vector(rng, outputs + 1, 0, 1);
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

bool same(const models::Detection& a, const models::Detection& b) {
  return a.box == b.box && a.conf == b.conf && a.class_id == b.class_id;
}

}  // namespace

TEST_CASE("cuda non_max_suppression keeps exactly the detections the cpu keeps") {
  Rng rng(102);
  const int classes = 4;
  for (int64_t count : {int64_t(1), int64_t(70), int64_t(900)}) {
    const std::vector<float> rows = random_rows(rng, count, classes);
    const Tensor on_gpu =
        Tensor::from_vector(rows, {1, 1, 1, int64_t(rows.size())}, Device::cuda(0));
    for (int variant = 0; variant < 6; ++variant) {
      models::NmsOptions options;
      options.conf_threshold = variant % 2 ? 0.25f : 0.001f;
      options.iou_threshold = variant < 3 ? 0.45f : 0.6f;
      options.multi_label = variant != 1;
      options.agnostic = variant == 2;
      if (variant == 3) options.classes = {0, 2};
      if (variant == 4) options.max_nms = 50;
      if (variant == 5) options.max_det = 7;
      CAPTURE(count);
      CAPTURE(variant);
      const std::vector<models::Detection> expected =
          models::non_max_suppression(rows, classes, options);
      const std::vector<models::Detection> kept =
          models::batch_detections(on_gpu.view<float>(), 1, classes, options).front();
      REQUIRE(kept.size() == expected.size());
      for (size_t k = 0; k < kept.size(); ++k) {
        CAPTURE(k);
        CHECK(same(expected[k], kept[k]));
      }
    }
  }
}

TEST_CASE("cuda detect of a head on the gpu equals detect on the host") {
  models::DetectionModel model(models::parse_model_config(R"(
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
)",
                                                          "two-level test model"));
  const int na = model.num_anchors(), no = model.outputs_per_anchor();
  Rng rng(103);
  const int64_t images = 2;
  std::vector<Tensor> head, device_head;
  for (int64_t size : {16, 8}) {
    std::vector<float> logits = random_vector<float>(rng, images * na * no * size * size, -3, 3);
    // Objectness far below the threshold except at about 1 cell in 20.
    const std::vector<double> pick = random_vector(rng, int64_t(logits.size()), 0, 1);
    for (int64_t i = 0; i < images * na; ++i)
      for (int64_t cell = 0; cell < size * size; ++cell) {
        const size_t at = size_t((i * no + 4) * size * size + cell);
        if (pick[at] > 0.05) logits[at] = -20;
      }
    head.push_back(Tensor::from_vector(logits, {images, na * no, size, size}));
    device_head.push_back(head.back().to(Device::cuda(0)));
  }
  const models::NmsOptions nms = models::validation_nms();
  const auto expected = models::detect(head, model, nms);
  const auto actual = models::detect(device_head, model, nms);
  REQUIRE(actual.size() == expected.size());
  size_t total = 0;
  for (size_t image = 0; image < expected.size(); ++image) {
    CAPTURE(image);
    REQUIRE(actual[image].size() == expected[image].size());
    total += expected[image].size();
    for (size_t k = 0; k < expected[image].size(); ++k) {
      const models::Detection &a = actual[image][k], &e = expected[image][k];
      CHECK(a.class_id == e.class_id);
      check_close(std::vector<float>{a.box.x1, a.box.y1, a.box.x2, a.box.y2, a.conf},
                  std::vector<float>{e.box.x1, e.box.y1, e.box.x2, e.box.y2, e.conf}, kFloatRtol,
                  1e-4, "detection");
    }
  }
  CHECK(total >= 10);  // the comparison covers real detections
}
